"""What a license statement covers: the code, or an artifact the repository also carries or points to.

READMEs and license files often license several things in one place: "The code is MIT; the model
weights are CC BY-NC 4.0", "The documentation is CC BY-SA 4.0. The sample code is MIT-0", "... however
the Inter font used in the demo is under the SIL Open Font License". A clause whose subject names only
an artifact (weights, checkpoints, data, documentation, text, fonts, images, media) licenses that
artifact, not the code; a clause whose subject names code, software, the project or nothing at all
licenses the code. Artifact licenses are kept (they decide the artifact's own files, see
license_files.py) but never AND-ed into the code's license.

Two more sources say what they cover by their name: license files (`LICENSE_weights`, `MODEL_LICENSE`,
`LICENSE-docs`: license.py `license_role`) and licenses made for one kind of artifact (the SIL Open
Font License is for fonts, the GNU Free Documentation License for documentation) when they appear
beside another license.
"""

from __future__ import annotations

import posixpath
import re

# artifact kind -> the words that name it in a clause's subject
ARTIFACTS = {
    "weights": r"weights?|checkpoints?|(?:pre-?trained\s+)?models?(?!\s+(?:code|source|implementation))|"
               r"parameters|embeddings",
    "data": r"data(?:sets?)?|corpus|corpora|annotations|benchmarks?",
    "docs": r"documentation|docs|tutorials?|(?:written|tutorial|book|documentation)\s+(?:texts?|content)|book|books|"
            r"articles?|chapters?|manual|written\s+material|lectures?|slides",
    "fonts": r"fonts?|typefaces?|emoji",
    "media": r"images?|pictures?|photos?|icons?|logos?|artwork|art|graphics|media|audio|sounds?|music|videos?|"
             r"assets?|illustrations?|figures?|screenshots?",
}
_KIND = {k: re.compile(rf"\b(?:{p})\b", re.IGNORECASE) for k, p in ARTIFACTS.items()}
_CODE = re.compile(r"\b(?:code|codebase|source|sources|software|librar(?:y|ies)|programs?|implementations?|scripts?|"
                   r"tools?|packages?|modules?|project|repository|repo|everything|all\s+files|binar(?:y|ies)|"
                   r"sdk|api|framework|application|app|plugin|extension)\b", re.IGNORECASE)
# the verb that ends a clause's subject: "X is licensed under", "X are made available under"
_VERB = re.compile(r"\b(?:is|are|were|will\s+be|shall\s+be|has\s+been|have\s+been)?\s*(?:made\s+)?(?:licen[cs]ed|"
                   r"available|released|distributed|provided|published|offered|covered|governed|dedicated|"
                   r"subject\s+to)\b|\bunder\s+(?:the\s+)?(?:terms|licen[cs]e)|"
                   r"\buses?\s+(?:an?\s+|the\s+)?(?:[\w.+\"'-]+\s+){0,4}licen[cs]e", re.IGNORECASE)
# a clause that names a license (not only "the LICENSE file") speaks for itself; one that does not goes with
# the clause before it ("See the LICENSE file.", "1.", "Background:")
_NAMES_A_LICENSE = re.compile(r"licen[cs]e(?!\s+file)|licen[cs]ed|\b(?:GPL|MIT|BSD|Apache|MPL|CC0|ISC)\b", re.IGNORECASE)
# where a subject stops naming what is licensed: "the fonts used in the demo code"
_QUALIFIER = re.compile(r"\b(?:used|included|contained|shipped|bundled|found|located|embedded|referenced)\s+"
                        r"(?:in|with|by|inside|within|from)\b|\((?:see|in|under)\b", re.IGNORECASE)
_SPLIT = re.compile(r"\n\s*\n|(?<=[.;:!?])\s+(?=[A-Z(*\[-])|;\s*|\n\s*[-*•]\s+|,?\s+\b(?:however|whereas|while|but|except\s+"
                    r"(?:for\s+)?that)\b,?\s*|,?\s+\band\s+(?=(?:the|all|any|our)\s+(?:\w+\s+)?(?:code|source|software|"
                    r"weights|models?|checkpoints|data|datasets|documentation|docs|fonts|images|content)\b)",
                    re.IGNORECASE)
# licenses written for one kind of artifact
_ARTIFACT_LICENSES = {"fonts": re.compile(r"^OFL-"), "docs": re.compile(r"^GFDL-")}


def clause_scope(clause: str) -> str:
    """`code`, or the artifact kind the clause's subject names and nothing else does."""
    verb = _VERB.search(clause)
    if verb is None:
        return "code"
    subject = clause[: verb.start()]
    qualifier = _QUALIFIER.search(subject)
    if qualifier:
        subject = subject[: qualifier.start()]
    subject = re.sub(r"\bopen[\s-]+source\b", " ", subject, flags=re.IGNORECASE)  # an adjective ("open source book")
    if _CODE.search(subject):
        return "code"
    kinds = [k for k, pat in _KIND.items() if pat.search(subject)]
    return "|".join(kinds) if kinds else "code"  # "the written content and images": docs|media


# "... and CC BY-NC 4.0 for the model weights": a license named for an artifact after the fact
_FOR_ARTIFACT = re.compile(r"\b(?:for|to)\s+(?:the\s+|all\s+|our\s+|its\s+|any\s+)?(?:[\w-]+\s+){0,2}?(?:"
                           + "|".join(ARTIFACTS.values()) + r")\b", re.IGNORECASE)
_PIECES = re.compile(r",\s*|\s+\band\s+|\s+\bwhile\s+", re.IGNORECASE)


def _for_artifact(piece: str) -> str | None:
    m = _FOR_ARTIFACT.search(piece)
    if m is None or _CODE.search(m.group(0)):
        return None
    return next((k for k, pat in _KIND.items() if pat.search(m.group(0)[3:])), None)


# folders and files a clause is about: "the `lib` directory", "the "tsl" folder", "runtime/", "lib/foo.c"
_FOLDER_REFS = [
    re.compile(r"[`'\"“](?P<p>[\w.-]+(?:/[\w.-]+)*)/?[`'\"”]\s+(?:sub)?(?:directory|directories|folder|folders|dir)\b",
               re.IGNORECASE),
    re.compile(r"\bthe\s+(?P<p>[\w-]+(?:/[\w.-]+)*)/?\s+(?:sub)?(?:directory|folder)\b", re.IGNORECASE),
    re.compile(r"\b(?:directory|folder)\s+[`'\"“](?P<p>[\w./-]+)[`'\"”]", re.IGNORECASE),
    re.compile(r"(?<![\w.:/@-])(?P<p>\.?[\w-]+(?:/[\w.-]+)*/)(?=[\s,.;:)`'\"”]|$)"),
]
_NOT_A_FOLDER = {"this", "that", "the", "each", "every", "any", "root", "top", "same", "its", "their", "other",
                 "following", "these", "those", "a", "an", "respective", "associated", "corresponding", "parent",
                 "given", "current", "source", "main", "project", "repository", "relevant", "appropriate",
                 "individual", "separate", "whole", "entire", "above", "below", "specific", "own", "home", "working"}
_NEGATED = re.compile(r"\b(?:outside|except|other\s+than|not\s+in|excluding|apart\s+from)\b[^.;]{0,40}$", re.IGNORECASE)
# "see the doc/ directory", "a copy is in docs/": where a text is, not what it covers
_REFERENCE = re.compile(r"\b(?:see|available|included|shipped|copy|text|refer)\b[^.;]{0,25}$",
                        re.IGNORECASE)
_FOLLOWING = re.compile(r"\bthe\s+following\s+(?:\w+\s+){0,2}?(?:files|directories|folders|paths|sub-?directories)\b",
                        re.IGNORECASE)
_PATH_ITEM = re.compile(r"^\s*(?:[-*•]\s*)?(?:all\s+(?:files|content|code)\s+(?:in|under)\s+(?:the\s+)?)?[`'\"“]?"
                        r"(?P<p>[\w.-]+(?:/[\w.-]+)+/?|[\w-]+/)[`'\"”]?(?:\s+(?:sub)?(?:directory|folder))?\s*[.,;]?\s*$",
                        re.IGNORECASE)
_SOME_FOLDERS = re.compile(r"\b(?:several|some|certain|a\s+few|specific|particular|selected)\s+(?:sub-?)?"
                           r"(?:directories|folders|modules|packages|files)\b", re.IGNORECASE)
_LICENSES_SOMETHING = re.compile(r"licen[cs]|\bunder\b|\buses?\b", re.IGNORECASE)


def _paths_in(clause: str) -> list[str]:
    """Folders or files a clause is about, unless it is about what lies outside them."""
    out = []
    for pat in _FOLDER_REFS:
        for m in pat.finditer(clause):
            p = m.group("p").strip("/")
            if (not p or p.lower() in _NOT_A_FOLDER or _NEGATED.search(clause[: m.start()])
                    or _REFERENCE.search(clause[: m.start()])
                    or ("." in p.split("/")[0] and not p.startswith("."))):  # `www.apache.org/licenses/` is a URL
                continue
            out.append(p)
    return list(dict.fromkeys(out))


def _scoped_clauses(text: str) -> list[tuple[str, str]]:
    """(clause, scope) with scope `code`, an artifact kind, or `path:<folder or file>|...`. A clause that
    licenses nothing itself ("See the LICENSE file.") goes with the one before; a clause naming a license
    "for the weights" is split there; "the following directories ... :" takes the paths listed after it."""
    out: list[tuple[str, str]] = []
    listing: list[int] = []  # clauses of an open "the following files" list: the header, then path items
    for clause in _SPLIT.split(text):
        if not clause or not clause.strip():
            continue
        item = _PATH_ITEM.match(clause)
        if listing and item:
            listing.append(len(out))
            out.append((clause, ""))
            continue
        _close(out, listing)
        listing = []
        if out and not _VERB.search(clause) and not _NAMES_A_LICENSE.search(clause) and len(clause.split()) <= 12:
            out.append((clause, out[-1][1]))  # "See the LICENSE file.": with the clause before
            continue
        scope = clause_scope(clause)
        licensing = _LICENSES_SOMETHING.search(clause)
        paths = _paths_in(clause) if licensing and scope == "code" else []
        if scope != "code":
            out.append((clause, scope))
        elif _FOLLOWING.search(clause) and licensing:
            listing = [len(out)]
            out.append((clause, "path:" + "|".join(paths) if paths else "code"))
        elif paths:
            out.append((clause, "path:" + "|".join(paths)))
        elif _SOME_FOLDERS.search(clause) and licensing:
            out.append((clause, "path:"))  # "several directories are under a commercial license": unnamed
        elif _FOR_ARTIFACT.search(clause):
            out.extend((piece, _for_artifact(piece) or "code") for piece in _PIECES.split(clause) if piece.strip())
        else:
            out.append((clause, "code"))
    _close(out, listing)
    return out


def _close(out: list[tuple[str, str]], listing: list[int]) -> None:
    """Give a "the following files" header and its path items one path scope (all the paths listed)."""
    if len(listing) < 2:
        return
    paths = [m.group("p").strip("/") for i in listing[1:] for m in [_PATH_ITEM.match(out[i][0])] if m]
    head, scope = out[listing[0]]
    scope = "path:" + "|".join(dict.fromkeys(([scope[5:]] if scope.startswith("path:") else []) + paths))
    for i in listing:
        out[i] = (out[i][0] if i == listing[0] else "", scope)
    out[listing[0]] = (head, scope)


def split_scopes(text: str) -> tuple[str, dict[str, str]]:
    """The text whose clauses license code, and per scope (an artifact kind, or `path:<folders>` for
    clauses about folders or files) the clauses that license only it."""
    code, other = [], {}
    for clause, scope in _scoped_clauses(text):
        if scope == "code":
            code.append(clause)
        elif clause:
            other.setdefault(scope, []).append(clause)
    return " ".join(code), {k: " ".join(v) for k, v in other.items()}


def scope_paths(scope: str) -> list[str]:
    """The folders/files of a `path:` scope (empty for artifact kinds)."""
    return [p for p in scope[5:].split("|") if p] if scope.startswith("path:") else []


def without_artifact_clauses(text: str) -> str:
    """`text` with the clauses that license only an artifact blanked out (for reading restrictive terms)."""
    for clause, scope in _scoped_clauses(text):
        if scope != "code" and clause:
            text = text.replace(clause, " ")
    return text


def artifact_license_kind(spdx_id: str) -> str | None:
    """`fonts` for OFL-*, `docs` for GFDL-*: licenses made for one kind of artifact."""
    return next((k for k, pat in _ARTIFACT_LICENSES.items() if pat.match(spdx_id)), None)


# file kinds, for applying an artifact license to the repository's own files
_EXT = {
    "weights": {".bin", ".safetensors", ".pt", ".pth", ".ckpt", ".h5", ".onnx", ".gguf", ".ggml", ".pb", ".tflite",
                ".mlmodel", ".npz", ".pkl", ".joblib", ".msgpack", ".params"},
    "data": {".csv", ".tsv", ".jsonl", ".parquet", ".arrow", ".feather", ".npy", ".h5ad", ".xlsx", ".sqlite"},
    "docs": {".md", ".markdown", ".rst", ".txt", ".adoc", ".org", ".tex", ".ipynb", ".html", ".htm", ".pdf"},
    "fonts": {".ttf", ".otf", ".woff", ".woff2", ".eot", ".pfb", ".pfa", ".bdf", ".pcf"},
    "media": {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".bmp", ".tif", ".tiff", ".mp3", ".wav",
              ".ogg", ".flac", ".mp4", ".webm", ".mov"},
}
_DIRS = {
    "weights": {"weights", "checkpoints", "models", "pretrained"},
    "data": {"data", "dataset", "datasets", "corpus"},
    "docs": {"doc", "docs", "documentation", "book", "chapters", "tutorials", "manual"},
    "fonts": {"fonts", "font"},
    "media": {"images", "img", "assets", "media", "icons", "art", "artwork", "static"},
}


def path_kind(path: str, kinds) -> str | None:
    """The scope among `kinds` (artifact kinds, or `docs|media` for a clause naming both) that a repository
    file falls under, by extension, else by folder; None for code."""
    ext = posixpath.splitext(path.lower())[1]
    folders = {p.lower() for p in path.split("/")[:-1]}
    for test in (lambda k: ext in _EXT.get(k, ()), lambda k: bool(folders & _DIRS.get(k, set())) and
                 ext not in CODE_EXTENSIONS):
        for scope in kinds:
            if any(test(k) for k in scope.split("|")):
                return scope
    return None


# a file under docs/ with a code extension is code (examples), not documentation
CODE_EXTENSIONS = {".py", ".js", ".ts", ".c", ".h", ".cc", ".cpp", ".hpp", ".java", ".go", ".rs", ".rb", ".php", ".cs", ".kt",
             ".swift", ".m", ".scala", ".sh", ".pl", ".pm", ".lua", ".r", ".jl", ".hs", ".ml", ".dart", ".sql", ".cu",
             ".mjs", ".cjs", ".jsx", ".tsx", ".vue", ".clj", ".ex", ".exs", ".erl", ".zig", ".nim", ".f90"}
