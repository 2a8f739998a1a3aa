"""`code_language_v1`: the language of each file (from its path, shebang and first lines), written as the
`language` column, and a filter on it: keeps code files in the listed languages (`not_code`,
`language:<name>`). A `language` column the input already has is used as it is."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from manifests.errors import ConfigError

from ..code.language import language_of
from ..registry import register
from ..stage import Mapper, with_columns

# The report's 14 common languages are not all named; these are the eight it names plus the six
# most common others in permissive GitHub code.
COMMON_LANGUAGES = ["Swift", "Python", "C", "Objective-C", "C++", "JavaScript", "Java", "Go",
                    "TypeScript", "Rust", "Ruby", "PHP", "C#", "Kotlin"]


@dataclass(frozen=True, kw_only=True)
class LanguageConfig:
    languages: list[str] | None = field(default_factory=lambda: list(COMMON_LANGUAGES))  # None: any code

    def __post_init__(self):
        require(self.languages is None or bool(self.languages), "languages must be a non-empty list or null")


@register
class CodeLanguage(Mapper):
    """Keeps code in the listed languages; uses the `language` column, else detects it from `path` and adds it."""

    name = "code_language_v1"
    Config = LanguageConfig

    def transform(self, table: pa.Table) -> tuple:
        if "language" in table.schema.names:
            lang = table.column("language")
            out = table
        elif "path" in table.schema.names:
            heads = pc.utf8_slice_codeunits(table.column("text"), 0, 512).to_pylist()
            lang = pa.array([language_of(p or "", h) for p, h in zip(table.column("path").to_pylist(), heads)],
                            pa.string())
            out = with_columns(table, {"language": lang})
        else:
            raise ConfigError(f"{self.name}: needs a `language` or `path` column (read with `format: repos`)")
        null = pa.scalar(None, pa.string())
        reasons = pa.nulls(table.num_rows, pa.string())
        if self.config.languages is not None:
            listed = pc.is_in(lang, value_set=pa.array(self.config.languages, pa.string()))
            other = pc.binary_join_element_wise(pa.scalar("language:"), lang, "")
            reasons = pc.if_else(listed, null, other)
        return out, pc.if_else(pc.is_null(lang), pa.scalar("not_code"), reasons)
