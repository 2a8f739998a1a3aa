"""Programming language of a file from its name, its shebang and (for `.h`) a glance at its text.

Covers the AFM report's 14 common languages (Swift, Python, C, Objective-C, C++, JavaScript,
Java, Go, and the rest of the usual set: TypeScript, Rust, Ruby, PHP, C#, Kotlin, Shell, ...).
Returns None for files that are not code (docs, data, binaries): the reader keeps those only
when asked.
"""

from __future__ import annotations

import posixpath
import re

EXTENSIONS = {
    ".swift": "Swift", ".py": "Python", ".pyi": "Python", ".pyx": "Cython", ".pxd": "Cython",
    ".c": "C", ".m": "Objective-C", ".mm": "Objective-C++", ".cc": "C++", ".cpp": "C++", ".cxx": "C++",
    ".c++": "C++", ".hpp": "C++", ".hh": "C++", ".hxx": "C++", ".h++": "C++", ".ipp": "C++",
    ".js": "JavaScript", ".mjs": "JavaScript", ".cjs": "JavaScript", ".jsx": "JavaScript",
    ".ts": "TypeScript", ".tsx": "TypeScript", ".java": "Java", ".go": "Go", ".rs": "Rust", ".rb": "Ruby",
    ".php": "PHP", ".cs": "C#", ".kt": "Kotlin", ".kts": "Kotlin", ".scala": "Scala", ".sh": "Shell",
    ".bash": "Shell", ".zsh": "Shell", ".lua": "Lua", ".pl": "Perl", ".pm": "Perl", ".r": "R",
    ".jl": "Julia", ".hs": "Haskell", ".ml": "OCaml", ".dart": "Dart", ".sql": "SQL", ".cu": "CUDA",
    ".f90": "Fortran", ".f": "Fortran", ".ex": "Elixir", ".exs": "Elixir", ".erl": "Erlang",
    ".clj": "Clojure", ".groovy": "Groovy", ".vue": "Vue", ".zig": "Zig", ".nim": "Nim",
}
FILENAMES = {"makefile": "Makefile", "gnumakefile": "Makefile", "dockerfile": "Dockerfile", "rakefile": "Ruby",
             "gemfile": "Ruby", "cmakelists.txt": "CMake", "build": "Starlark", "build.bazel": "Starlark"}
INTERPRETERS = {"python": "Python", "python2": "Python", "python3": "Python", "sh": "Shell", "bash": "Shell",
                "zsh": "Shell", "dash": "Shell", "ksh": "Shell", "node": "JavaScript", "nodejs": "JavaScript",
                "ruby": "Ruby", "perl": "Perl", "php": "PHP", "lua": "Lua", "swift": "Swift", "rscript": "R",
                "julia": "Julia", "deno": "TypeScript", "ts-node": "TypeScript", "escript": "Erlang",
                "elixir": "Elixir", "groovy": "Groovy", "kotlin": "Kotlin", "scala": "Scala"}
_SHEBANG = re.compile(r"^#!\s*(?:\S*/)?(?:env\s+(?:-\S+\s+)*)?([A-Za-z][\w.+-]*)")
_OBJC = re.compile(r"^\s*(@interface|@implementation|@protocol|#import\s)", re.MULTILINE)
_CPP = re.compile(r"^\s*(namespace\s|template\s*<|class\s+\w+[^;]*\{|using\s+namespace|#include\s*<(iostream|"
                  r"string|vector|memory|map)>)", re.MULTILINE)


def language_of(path: str, head: str | None = None) -> str | None:
    """`head` is the file's first bytes as text (for shebangs and `.h` disambiguation)."""
    name = posixpath.basename(path).lower()
    if name in FILENAMES:
        return FILENAMES[name]
    ext = posixpath.splitext(name)[1]
    if ext == ".h":
        if head and _OBJC.search(head):
            return "Objective-C"
        if head and _CPP.search(head):
            return "C++"
        return "C"
    if ext in EXTENSIONS:
        return EXTENSIONS[ext]
    if head and head.startswith("#!"):
        m = _SHEBANG.match(head)
        if m:
            interp = re.sub(r"[\d.]+$", "", m.group(1).lower()) or m.group(1).lower()
            return INTERPRETERS.get(m.group(1).lower()) or INTERPRETERS.get(interp)
    return None
