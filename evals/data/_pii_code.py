"""Code with planted credentials for `cidermill eval data pii` (built independently of corpus/pii).

Carriers are real source files (../shared/data/code_licensed and the repositories bundled in
data/samples/code). Into each we insert, at line boundaries with the indentation of the next line,
statements in the file's language that hold credentials the way code holds them: module constants,
keyword arguments, dict/object literals, `#define`s, `setdefault`/`||=` defaults, connection URLs,
Authorization headers, PEM blocks, author e-mails; and statements that hold placeholders or
look-alikes (changeme, `<your-key>`, `${VAR}`, translated labels, hashes under non-credential
names, test addresses), which must not be reported.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from pathlib import Path

PASSWORD_NAMES = ["password", "db_password", "DB_PASSWORD", "adminPassword", "smtp_pass", "MYSQL_ROOT_PASSWORD",
                  "pwd", "passwd", "redis_password", "userPassword", "PG_PASS", "mail_password"]
TOKEN_NAMES = ["api_key", "API_KEY", "apiKey", "secret_key", "SECRET_KEY", "auth_token", "access_token",
               "client_secret", "STRIPE_SECRET", "webhook_secret", "jwt_secret", "private_token", "ACCESS_KEY",
               "appSecret", "consumer_key", "SESSION_SECRET", "encryption_key", "refreshToken"]
WORDS = ["Summer", "dragon", "Monkey", "Tr0ub4dor", "Sunshine", "Winter", "Bayern", "Falcon", "maple", "Orbit",
         "candle", "Zebra", "kitten", "Rocket", "Lisboa", "tiger"]

LANG = {".py": "py", ".pyx": "py", ".pxd": "py", ".js": "js", ".mjs": "js", ".ts": "js", ".rb": "rb",
        ".c": "c", ".h": "c", ".cpp": "c", ".cc": "c", ".hpp": "c", ".rs": "rs"}
ASSIGN = {
    "py": ['{N} = "{v}"', "{n} = '{v}'", 'client = Client({n}="{v}", timeout=30)',
           'CONFIG = {{"{n}": "{v}", "debug": False}}', 'os.environ.setdefault("{N}", "{v}")', '{n}: str = "{v}"'],
    "js": ['const {N} = "{v}";', "const config = {{ {n}: '{v}', retries: 3 }};", 'this.{n} = "{v}";',
           'process.env.{N} = "{v}";'],
    "rb": ['{N} = "{v}"', "config.{n} = '{v}'", 'ENV["{N}"] ||= "{v}"'],
    "c": ['#define {N} "{v}"', 'static const char *{n} = "{v}";', 'const char {n}[] = "{v}";'],
    "rs": ['const {N}: &str = "{v}";', 'let {n} = "{v}";', 'static {N}: &str = "{v}";'],
}
COMMENT = {"py": "#", "js": "//", "rb": "#", "c": "//", "rs": "//"}


def _rand(rng, pool, n):
    return "".join(rng.choice(pool) for _ in range(n))


def password(rng) -> str:
    r = rng.random()
    if r < 0.4:
        return rng.choice(WORDS) + str(rng.randint(1, 2025)) + rng.choice("!@#$&*.?")
    if r < 0.6:
        return _rand(rng, string.ascii_letters + string.digits + "!@#$%^&*", rng.randint(10, 16))
    if r < 0.75:
        return "-".join(rng.sample([w.lower() for w in WORDS], 3)) + str(rng.randint(1, 99))
    if r < 0.9:
        return rng.choice(WORDS).lower() + _rand(rng, string.digits, 4)
    return _rand(rng, string.ascii_lowercase + string.digits, 12)


def generic_token(rng) -> str:
    r = rng.random()
    if r < 0.3:
        return _rand(rng, "0123456789abcdef", rng.choice([32, 40, 64]))
    if r < 0.5:
        return base64.b64encode(rng.randbytes(rng.choice([24, 30, 32]))).decode()
    if r < 0.65:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if r < 0.85:
        return _rand(rng, string.ascii_letters + string.digits, rng.randint(24, 40))
    return "django-insecure-" + _rand(rng, string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)", 50)


def provider_key(rng) -> tuple[str, str]:
    an = string.ascii_letters + string.digits
    return rng.choice([
        ("AWS_ACCESS_KEY_ID", "AKIA" + _rand(rng, string.ascii_uppercase + "234567", 16)),
        ("aws_secret_access_key", base64.b64encode(rng.randbytes(30)).decode()),
        ("GITHUB_TOKEN", "ghp_" + _rand(rng, an, 36)),
        ("gh_token", "github_pat_" + _rand(rng, an, 22) + "_" + _rand(rng, an, 59)),
        ("SLACK_BOT_TOKEN", f"xoxb-{_rand(rng, string.digits, 11)}-{_rand(rng, string.digits, 13)}-{_rand(rng, an, 24)}"),
        ("stripe_key", "sk_live_" + _rand(rng, an, 24)),
        ("GOOGLE_MAPS_KEY", "AIza" + _rand(rng, an + "_-", 35)),
        ("OPENAI_API_KEY", "sk-proj-" + _rand(rng, an + "_-", 48) + "T3BlbkFJ" + _rand(rng, an + "_-", 48)),
        ("HF_TOKEN", "hf_" + _rand(rng, string.ascii_letters, 34)),
        ("SENDGRID_API_KEY", f"SG.{_rand(rng, an, 22)}.{_rand(rng, an + '_-', 43)}"),
        ("npm_token", "npm_" + _rand(rng, an, 36)),
        ("key", "glpat-" + _rand(rng, an, 20)),
        ("token", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + _rand(rng, an, 40) + "." + _rand(rng, an + "_-", 43)),
    ])


def private_key_block(rng, lang) -> tuple[str, str]:
    kind = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    body = base64.b64encode(rng.randbytes(rng.choice([700, 1200]))).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    block = f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----"
    if lang == "py":
        return f'SIGNING_KEY = """{block}"""', block
    escaped = block.replace("\n", "\\n")
    return {"js": 'const privateKey = "{b}";', "rb": 'PRIVATE_KEY = "{b}"', "c": 'static const char *pem = "{b}";',
            "rs": 'const PEM: &str = "{b}";'}[lang].format(b=escaped), escaped


def url_credential(rng) -> tuple[str, str]:
    pw = password(rng).replace("@", "#").replace("/", "9").replace(":", "!")
    url = rng.choice([f"postgresql://app:{pw}@db.internal:5432/app", f"redis://:{pw}@cache:6379/0",
                      f"mongodb+srv://admin:{pw}@cluster0.ab1cd.mongodb.net/prod", f"amqp://svc:{pw}@rabbit:5672/",
                      f"https://deploy:{pw}@git.corp.example-host.io/repo.git"])
    return url, pw


NEGATIVES = [  # (name, value): placeholders and look-alikes that are not credentials
    ("password", "changeme"), ("API_KEY", "<your-api-key>"), ("token", "${GITHUB_TOKEN}"), ("SECRET_KEY", "xxx"),
    ("api_key", "YOUR_API_KEY_HERE"), ("password", ""), ("password", "Passwort"), ("password", "Mot de passe"),
    ("password", "Contraseña"), ("secret", "secret"), ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
    ("auth_token", "{{ auth_token }}"), ("password", "********"), ("db_password", "%(DB_PASSWORD)s"),
    ("token_type", "Bearer"), ("password_hint", "At least 8 characters"), ("CHECKSUM", "d41d8cd98f00b204e9800998ecf8427e"),
    ("REVISION", "6d43fb980f9fee3c892a914eda09951f772ad10d"), ("request_id", str(uuid.UUID(int=12345, version=4))),
    ("private_key_path", "/etc/ssl/private/server.key"), ("PASSWORD_FIELD", "password_confirmation"),
    ("api_key", "dummy-key-for-tests"), ("password", "password123"), ("client_secret", "REPLACE_ME"),
    ("access_token", "TODO"), ("apiKey", "process.env.API_KEY"), ("contact", "dev@example.com"),
    ("maintainer", "admin@localhost"), ("support_email", "noreply@test"), ("password_label", "Enter your password"),
]


def carriers(shared: Path, samples: Path) -> list[tuple[str, str]]:
    """(name, text) of real source files in the languages above, 300 B to 60 KB."""
    files = sorted((shared / "code_licensed" / "files").glob("*/*")) if shared.is_dir() else []
    files += sorted(p for p in samples.rglob("*") if p.is_file() and "demo__" not in str(p))
    out = []
    for p in files:
        if p.suffix in LANG and 300 <= p.stat().st_size <= 60_000:
            out.append((str(p.relative_to(p.parents[1])), p.read_text(encoding="utf-8", errors="replace")))
    return out


def plant(text: str, lang: str, rng: random.Random, n_pos: int, n_neg: int):
    """Insert statements at line boundaries; returns (text, positives, negatives) with (start, end, family)."""
    lines = text.split("\n")
    stmts: list[tuple[str, str, str]] = []  # (statement, value, family or "negative")
    for _ in range(n_pos):
        family = rng.choice(["password", "generic", "provider", "private_key", "url", "email"])
        if family == "private_key":
            stmt, value = private_key_block(rng, lang)
        elif family == "url":
            url, value = url_credential(rng)
            stmt = rng.choice(ASSIGN[lang]).format(N="DATABASE_URL", n="conn_url", v=url)
        elif family == "email":
            user = f"{rng.choice(WORDS).lower()}.{rng.choice(['lima', 'chen', 'okafor', 'weber'])}"
            value = f"{user}@{rng.choice(['dataworks.io', 'gmail.com', 'uni-graz.at'])}"
            as_code = rng.choice(ASSIGN[lang]).format(N="AUTHOR_EMAIL", n="author_email", v=value)
            stmt = rng.choice([f"{COMMENT[lang]} Maintainer: Ana Lima <{value}>",
                               f"{COMMENT[lang]} Copyright 2024 {value}", as_code])
        else:
            if family == "provider":
                name, value = provider_key(rng)
            elif family == "password":
                name, value = rng.choice(PASSWORD_NAMES), password(rng)
            else:
                name, value = rng.choice(TOKEN_NAMES), generic_token(rng)
            template = rng.choice(ASSIGN[lang])
            if family != "password" and lang in ("py", "js") and rng.random() < 0.15:
                template = 'headers = {{"Authorization": "Bearer {v}"}}' if lang == "py" else \
                    'headers.Authorization = `Bearer {v}`;'
            stmt = template.format(N=name.upper(), n=name, v=value)
        stmts.append((stmt, value, family))
    for _ in range(n_neg):
        name, value = rng.choice(NEGATIVES)
        stmts.append((rng.choice(ASSIGN[lang]).format(N=name.upper() if name.isupper() else name, n=name, v=value),
                      value, "negative"))
    for stmt in stmts:
        at = rng.randint(0, len(lines))
        following = lines[at] if at < len(lines) else ""
        indent = following[:len(following) - len(following.lstrip())] if lang == "py" else ""
        lines.insert(at, indent + stmt[0])
    out = "\n".join(lines)
    positives, negatives, cursor = [], [], {}
    for stmt, value, family in stmts:
        start = out.find(stmt, cursor.get(stmt, 0))
        cursor[stmt] = start + 1
        v_start = out.find(value, start) if value else start
        entry = (v_start, v_start + len(value), family)
        (negatives if family == "negative" else positives).append(entry)
    return out, positives, negatives
