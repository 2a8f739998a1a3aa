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
    "docs": r"documentation|docs|tutorials?|texts?|book|books|articles?|chapters?|content|prose|manual|"
            r"written\s+material|lectures?|slides|notebooks?\s+text",
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
                   r"subject\s+to)\b|\bunder\s+(?:the\s+)?(?:terms|licen[cs]e)", re.IGNORECASE)
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
    return kinds[0] if kinds else "code"


def _scoped_clauses(text: str) -> list[tuple[str, str]]:
    """(clause, scope); a clause that licenses nothing itself ("See the LICENSE file.") goes with the one before."""
    out: list[tuple[str, str]] = []
    for clause in _SPLIT.split(text):
        if not clause or not clause.strip():
            continue
        scope = clause_scope(clause) if _VERB.search(clause) or not out else out[-1][1]
        out.append((clause, scope))
    return out


def split_scopes(text: str) -> tuple[str, dict[str, str]]:
    """The text whose clauses license code, and per artifact kind the clauses that license only it."""
    code, other = [], {}
    for clause, scope in _scoped_clauses(text):
        if scope == "code":
            code.append(clause)
        else:
            other.setdefault(scope, []).append(clause)
    return " ".join(code), {k: " ".join(v) for k, v in other.items()}


def without_artifact_clauses(text: str) -> str:
    """`text` with the clauses that license only an artifact blanked out (for reading restrictive terms)."""
    for clause, scope in _scoped_clauses(text):
        if scope != "code":
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
    """The artifact kind (among `kinds`) a repository file is, by extension, else by folder; None for code."""
    ext = posixpath.splitext(path.lower())[1]
    for kind in kinds:
        if ext in _EXT.get(kind, ()):
            return kind
    folders = {p.lower() for p in path.split("/")[:-1]}
    for kind in kinds:
        if folders & _DIRS.get(kind, set()) and ext not in _CODE_EXT:
            return kind
    return None


# a file under docs/ with a code extension is code (examples), not documentation
_CODE_EXT = {".py", ".js", ".ts", ".c", ".h", ".cc", ".cpp", ".hpp", ".java", ".go", ".rs", ".rb", ".php", ".cs", ".kt",
             ".swift", ".m", ".scala", ".sh", ".pl", ".pm", ".lua", ".r", ".jl", ".hs", ".ml", ".dart", ".sql", ".cu",
             ".mjs", ".cjs", ".jsx", ".tsx", ".vue", ".clj", ".ex", ".exs", ".erl", ".zig", ".nim", ".f90"}
