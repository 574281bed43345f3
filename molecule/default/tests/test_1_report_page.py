"""The cluster report page that site.yml wrote, opened in a real browser (headless Chromium, Debian's package)."""

import shutil
import subprocess

from PIL import Image
from testbed_fixtures import INVENTORY, PROJECT

PAGE = INVENTORY.parent / "reports" / "index.html"
# Kept with the test output: what the page looked like.
SHOT = PROJECT / "tests" / "output" / "report-page-default.png"
PASS_GREEN = (0x1A, 0x7F, 0x37)
BUSBW_BLUE = (0x1F, 0x6F, 0xEB)  # plugins/plugin_utils/plots.py BUSBW: the measured curve


def near(pixel, colour, tolerance=24):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


def test_the_page_renders_its_verdict_and_the_ladders_plot():
    assert PAGE.exists()
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "chromium is not installed (scripts/bootstrap installs it)"
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,2400",
                          "--screenshot=%s" % SHOT, PAGE.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0 and SHOT.exists(), run.stderr[-2000:]
    image = Image.open(SHOT).convert("RGB")
    # The verdict banner spans the top of the page, in the colour of its verdict.
    assert all(near(image.getpixel((x, 8)), PASS_GREEN) for x in (4, 600, 1195)), image.getpixel((600, 8))
    # The CPU rung's busbw curve is drawn (an SVG the browser rendered, not only text in the file).
    curve = sum(1 for pixel in image.getdata() if near(pixel, BUSBW_BLUE))
    assert curve > 150, "only %d pixels of the curve's colour" % curve
