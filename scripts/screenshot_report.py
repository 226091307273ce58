"""Makes the README's picture, docs/report.png (issue 35): the HTML report of
the demo's trace (docs/transformer_adamw_3steps.trace.jsonl.gz, recorded
by scripts/record_demo.py) in headless Chromium, the mouse on the peak and
its point selected so that the panel beside the chart gives each category's
bytes there, cropped to the top of the page (the peak's sentence, the chart
with its three steps, the panel) and saved as a small PNG.

    .venv/bin/python scripts/screenshot_report.py [--trace T] [--out docs/report.png] [--width 1280]

Needs selenium (in .venv, scripts/venv.sh), Debian's chromium and
chromium-driver, and the memtl command (MEMTL_BIN, else build/cli/memtl).
The PNG is shrunk by Pillow (a palette of 256 colours, optimize=True): in
this interpreter if it has Pillow, else in /usr/bin/python3 (Debian's
python3-pil); without either the picture is kept as Chromium wrote it.
"""

import argparse
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MEMTL = os.environ.get("MEMTL_BIN", os.path.join(ROOT, "build", "cli", "memtl"))

# Reads PNG argv[1], writes it to argv[2] as a 256-colour palette image,
# optimized. The report's flat colours survive the palette.
SHRINK = """
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
im.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
    sys.argv[2], format="PNG", optimize=True)
"""


def shrink(src, dst):
    """Writes `src` to `dst` shrunk by Pillow; returns False where none has Pillow."""
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import PIL"], capture_output=True).returncode == 0:
            subprocess.run([python, "-c", SHRINK, src, dst], check=True)
            return True
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=os.path.join(ROOT, "docs", "transformer_adamw_3steps.trace.jsonl.gz"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "report.png"))
    parser.add_argument("--width", type=int, default=1280, help="the window's width in CSS pixels")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "report.html")
        subprocess.run([MEMTL, "export", args.trace, "-o", html, "--quiet"], check=True)

        options = webdriver.ChromeOptions()
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--hide-scrollbars", "--force-device-scale-factor=1",
                  "--window-size=%d,1600" % args.width, "--host-resolver-rules=MAP * ~NOTFOUND"):
            options.add_argument(a)
        options.binary_location = shutil.which("chromium")
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
        try:
            driver.get("file://" + html)
            for _ in range(50):
                if driver.execute_script("return !!(window.memtlReport && window.memtlReport.charts[0])"):
                    break
                time.sleep(0.1)

            # The mouse on the peak, halfway up the plot (as
            # tests/python/test_report_browser.py hovers).
            g = "window.memtlReport.charts[0]"
            px, area, peak_us = driver.execute_script(
                "var d = window.memtlReport.data.devices[0];"
                "return [%s.toDomXCoord(d.peak.us / 1000), %s.getArea(), d.first_us + d.peak.us];" % (g, g))
            canvas = driver.find_element(By.CSS_SELECTOR, "#device-0 .chart canvas")
            w, h = canvas.size["width"], canvas.size["height"]
            ActionChains(driver).move_to_element_with_offset(
                canvas, int(round(px - w / 2)), int(round(area["y"] + area["h"] / 2 - h / 2))).perform()
            time.sleep(0.3)
            # A pixel holds about two points: the mouse may land on the
            # peak's neighbour. The chart's row of the largest total is the
            # peak's; selecting it shows it in the panel.
            driver.execute_script(
                "var g = %s, best = -1, row = 0;"
                "for (var r = 0; r < g.numRows(); ++r) {"
                "  var total = 0;"
                "  for (var c = 1; c < g.numColumns(); ++c) total += g.getValue(r, c) || 0;"
                "  if (total > best) { best = total; row = r; } }"
                "g.setSelection(row);" % g)
            time.sleep(0.3)
            when = driver.find_element(By.CSS_SELECTOR, "#device-0 .legend .when").get_attribute("data-us")
            if int(when) != peak_us:
                sys.exit("the panel shows %s us, the peak is at %s us" % (when, peak_us))

            # The top of the page, down to the line under the chart and
            # across to the panel's right edge.
            right, bottom = driver.execute_script(
                "var box = document.querySelector('#device-0 .chart-box'), right = 0;"
                "var walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT), range = document.createRange();"
                "while (walk.nextNode()) { range.selectNodeContents(walk.currentNode);"
                "  right = Math.max(right, range.getBoundingClientRect().right); }"
                "box.querySelectorAll('canvas, button, input').forEach(function (e) {"
                "  right = Math.max(right, e.getBoundingClientRect().right); });"
                "var how = document.querySelector('#device-0 .how').getBoundingClientRect();"
                "return [right, how.bottom];")
            width = min(args.width, int(right) + 24)
            shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": False,
                "clip": {"x": 0, "y": 0, "width": width, "height": int(bottom) + 12, "scale": 1}})
        finally:
            driver.quit()

        raw = os.path.join(tmp, "raw.png")
        with open(raw, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        tmp_out = args.out + ".tmp"
        if not shrink(raw, tmp_out):
            print("note: no Pillow found; the PNG is kept as Chromium wrote it", file=sys.stderr)
            shutil.copyfile(raw, tmp_out)
        os.replace(tmp_out, args.out)
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)), file=sys.stderr)


if __name__ == "__main__":
    main()
