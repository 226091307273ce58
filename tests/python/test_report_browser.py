"""The HTML report in a real browser (issue 21's "How to test it"): Debian's
chromium and chromium-driver, driven by selenium, load a report with the
network off and check that it requests nothing beyond its own file, that
hovering a point shows the bytes the .json export has at that time, that
dragging zooms, that a category's toggle hides it, that the device selector
and the sortable tables work. Screenshots go to $MEMTL_REPORT_BROWSER_OUT
(look at them).

Run by CTest as `report_browser` (tests/CMakeLists.txt), which sets
MEMTL_REPORT_BROWSER_OUT and MEMTL_BIN; skipped elsewhere, and where
chromium, chromedriver, selenium or torch is missing.

The trace: a small conv net, three steps under torch.profiler's schedule
(ProfilerStep#0..2), recorded with memtl.save and doubled onto cuda:0 so
that the report has two devices (report_trace.py).
"""

import gzip
import json
import os
import shutil
import subprocess
import time

import pytest

from report_trace import record, two_devices

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.environ.get("MEMTL_REPORT_BROWSER_OUT")
MEMTL = os.environ.get("MEMTL_BIN", os.path.join(ROOT, "build", "cli", "memtl"))
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

try:
    import selenium  # noqa: F401
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError:
    selenium = None

try:
    import torch
except ImportError:
    torch = None

pytestmark = [
    pytest.mark.skipif(not OUT, reason="run by `ctest -R report_browser` (sets MEMTL_REPORT_BROWSER_OUT)"),
    pytest.mark.skipif(selenium is None, reason="selenium is not installed (scripts/venv.sh installs it)"),
    pytest.mark.skipif(not CHROMIUM or not CHROMEDRIVER,
                       reason="chromium or chromedriver is missing (Debian chromium, chromium-driver)"),
    pytest.mark.skipif(torch is None, reason="torch is needed to record the trace"),
]

CATEGORIES = ["PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT",
              "AUTOGRAD_DETAIL", "unknown"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("report"))
    steps = os.path.join(tmp, "steps.trace.jsonl.gz")
    record(steps)
    trace = os.path.join(tmp, "two_devices.trace.jsonl.gz")
    two_devices(steps, trace, tmp)
    html = os.path.join(tmp, "report.html")
    jsons = {"cuda:0": os.path.join(tmp, "cuda.json"), "cpu": os.path.join(tmp, "cpu.json")}
    subprocess.run([MEMTL, "export", trace, "-o", html, "-o", jsons["cuda:0"], "--quiet"], check=True)
    subprocess.run([MEMTL, "export", trace, "--device", "cpu", "-o", jsons["cpu"], "--quiet"], check=True)
    sizes = {}
    for dev, path in jsons.items():
        with open(path) as f:
            times, rows = json.load(f)
        # Pre-existing memory is shown at the first time, in a row of its
        # own before the row of that time (as PyTorch writes it): a time may
        # have two rows.
        sizes[dev] = {}
        for t, row in zip(times, rows):
            sizes[dev].setdefault(t, []).append(row[1:])
    os.makedirs(OUT, exist_ok=True)
    return html, sizes


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--host-resolver-rules=MAP * ~NOTFOUND"):
        options.add_argument(a)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # The network off: any request beyond the file itself fails (and is
    # listed by the performance log, which the test reads).
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions",
                           {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0})
    yield driver
    driver.quit()


# Moves the peak's marker of device arguments[0] around each step's line
# and lists, for each place, the step labels its line or label meets;
# returns [how many places were inside the plot, the meetings]. The marker
# goes back where it was.
CROSSINGS = """
var index = arguments[0], g = window.memtlReport.charts[index];
var wrap = document.querySelector('#device-' + index + ' .chart-wrap');
var peak = wrap.querySelector('.marker.peak'), kept = peak.getAttribute('data-x');
var steps = wrap.querySelectorAll('.marker.step');
function meet(a, b) {
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}
var xs = [];
steps.forEach(function (m) {
  var px = g.toDomXCoord(Number(m.getAttribute('data-x')));
  for (var d = -120; d <= 120; d += 3) xs.push(g.toDataXCoord(px + d));
});
var bad = [], tried = 0;
xs.forEach(function (x) {
  peak.setAttribute('data-x', x);
  g.updateOptions({});
  if (peak.style.display === 'none') return;
  ++tried;
  var line = peak.getBoundingClientRect(), label = peak.querySelector('span').getBoundingClientRect();
  steps.forEach(function (m) {
    var s = m.querySelector('span');
    if (m.style.display === 'none' || s.style.display === 'none') return;
    var r = s.getBoundingClientRect();
    if (r.width > 0 && (meet(r, line) || meet(r, label)))
      bad.push([m.textContent, line.left, label.left, label.right, r.left, r.right]);
  });
});
peak.setAttribute('data-x', kept);
g.updateOptions({});
return [tried, bad];
"""


def shot(driver, name):
    driver.save_screenshot(os.path.join(OUT, name + ".png"))


def chart(driver, index):
    return "window.memtlReport.charts[%d]" % index


def canvas_of(driver, index):
    return driver.find_element(By.CSS_SELECTOR, "#device-%d .chart canvas" % index)


def hover(driver, index, x_ms):
    """Moves the mouse over the chart at x_ms, halfway up the plot area."""
    g = chart(driver, index)
    px, area = driver.execute_script("return [%s.toDomXCoord(arguments[0]), %s.getArea()]" % (g, g), x_ms)
    canvas = canvas_of(driver, index)
    w, h = canvas.size["width"], canvas.size["height"]
    y = area["y"] + area["h"] / 2
    ActionChains(driver).move_to_element_with_offset(canvas, int(round(px - w / 2)), int(round(y - h / 2))).perform()
    time.sleep(0.2)


def legend(driver, index):
    """The legend's time (us) and bytes by category."""
    box = driver.find_element(By.CSS_SELECTOR, "#device-%d .legend" % index)
    when = int(box.find_element(By.CSS_SELECTOR, ".when").get_attribute("data-us"))
    cells = {r.get_attribute("data-category"): int(r.get_attribute("data-bytes"))
             for r in box.find_elements(By.CSS_SELECTOR, "tr.cat")}
    op = box.find_element(By.CSS_SELECTOR, ".op").text
    return when, [cells[c] for c in CATEGORIES], op


def test_report_in_the_browser(report, browser):
    html, sizes = report
    assert os.path.getsize(html) < 5 << 20
    with open(html, encoding="utf-8") as f:
        text = f.read()
    assert "Written from the timeline alone" not in text, \
        "the CLI does not pass the report's data (PipelineOptions::report, ExportInput::report)"
    browser.get("file://" + html)
    time.sleep(0.5)

    # Nothing but the file itself is requested, and nothing failed.
    urls = []
    for entry in browser.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    assert urls and all(u == "file://" + html or u.startswith("data:") for u in urls), urls
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors

    # The default device (cuda:0: the accelerator that peaks highest), listed
    # first, is named by the title; the image has alt text.
    data = browser.execute_script("return window.memtlReport.data")
    names = [d["name"] for d in data["devices"]]
    assert names == ["cuda:0", "cpu"]
    assert data["selected"] == 0 and "cuda:0" in browser.title
    img = browser.find_element(By.CSS_SELECTOR, "#device-0 img.plot")
    assert "peak" in img.get_attribute("alt")
    assert [s[0] for s in data["steps"]] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"] * 2
    markers = browser.find_elements(By.CSS_SELECTOR, "#device-0 .marker.step")
    assert len(markers) == 3 and markers[0].text.startswith("ProfilerStep#")
    # A step's label ends before the next step's line (shortened or hidden).
    overlaps = browser.execute_script("""
        var m = document.querySelectorAll('#device-0 .marker.step'), bad = [];
        for (var i = 0; i + 1 < m.length; ++i) {
          var label = m[i].querySelector('span').getBoundingClientRect();
          var next = m[i + 1].getBoundingClientRect().left;
          if (label.width > 0 && label.right > next) bad.push([i, label.right, next]);
        }
        return bad;""")
    assert not overlaps, overlaps
    assert browser.find_element(By.CSS_SELECTOR, "#device-0 .marker.peak").is_displayed()
    # The peak's line and label never meet a step's label, wherever the peak
    # falls: its marker is moved every 3 px across 120 px on both sides of
    # each step's line and the chart redrawn (the red line crossed the
    # label of the step the peak falls in when it fell just after its start).
    tried, crossings = browser.execute_script(CROSSINGS, 0)
    assert tried > 100 and not crossings, crossings
    shot(browser, "report_loaded")

    # Hovering a point shows what the .json export has at its time, and an op.
    dev = data["devices"][0]
    for k in (0, len(dev["t"]) // 3, dev["t"].index(dev["peak"]["us"]), len(dev["t"]) - 2):
        x = dev["t"][k] / 1000
        hover(browser, 0, x)
        when, shown, op = legend(browser, 0)
        assert shown in sizes["cuda:0"][when]
        assert op.startswith("op: ")
        # The point shown is the one aimed at, a neighbour of it, or one
        # within 2.5 px of it: the mouse lands on whole pixels and dygraphs
        # picks the nearest point (a fresh CI run showed 1.58 px).
        px = browser.execute_script("return %s.toDomXCoord(arguments[0]) - %s.toDomXCoord(arguments[1])"
                                    % (chart(browser, 0), chart(browser, 0)), x, (when - dev["first_us"]) / 1000)
        near = {dev["t"][j] for j in (k - 1, k, k + 1) if 0 <= j < len(dev["t"])}
        assert abs(px) <= 2.5 or when - dev["first_us"] in near, (px, when, k)
    hover(browser, 0, dev["peak"]["us"] / 1000)  # for the screenshot
    shot(browser, "report_hover_peak")

    # Dragging across the chart zooms in; Zoom out restores the range.
    g = chart(browser, 0)
    full = browser.execute_script("return %s.xAxisRange()" % g)
    area = browser.execute_script("return %s.getArea()" % g)
    canvas = canvas_of(browser, 0)
    w, h = canvas.size["width"], canvas.size["height"]
    y = int(area["y"] + area["h"] / 2 - h / 2)
    x0 = int(area["x"] + 0.3 * area["w"] - w / 2)
    x1 = int(area["x"] + 0.5 * area["w"] - w / 2)
    ActionChains(browser).move_to_element_with_offset(canvas, x0, y).click_and_hold() \
        .move_by_offset((x1 - x0) // 2, 0).move_by_offset((x1 - x0) - (x1 - x0) // 2, 0).release().perform()
    time.sleep(0.3)
    zoomed = browser.execute_script("return %s.xAxisRange()" % g)
    assert zoomed[0] > full[0] and zoomed[1] < full[1]
    assert zoomed[1] - zoomed[0] < 0.5 * (full[1] - full[0])
    shot(browser, "report_zoomed")
    browser.find_element(By.XPATH, "//section[@id='device-0']//button[text()='Zoom out']").click()
    time.sleep(0.3)
    assert browser.execute_script("return %s.xAxisRange()" % g) == full

    # Toggling the largest category at the peak hides it: its series is not
    # drawn, the legend greys it, and the stack's top comes down.
    peak_row = dev["v"][dev["t"].index(dev["peak"]["us"])]
    big = max(range(8), key=lambda c: peak_row[c])
    top_before = browser.execute_script("return %s.yAxisRange()[1]" % g)
    browser.find_element(By.CSS_SELECTOR, "#device-0 .toggles input[data-category='%s']" % CATEGORIES[big]).click()
    time.sleep(0.3)
    assert browser.execute_script("return %s.visibility()[7 - arguments[0]]" % g, big) is False
    top_after = browser.execute_script("return %s.yAxisRange()[1]" % g)
    assert top_after < top_before
    hover(browser, 0, dev["peak"]["us"] / 1000)
    row = browser.find_element(By.CSS_SELECTOR, "#device-0 .legend tr[data-category='%s']" % CATEGORIES[big])
    assert "off" in row.get_attribute("class")
    shot(browser, "report_toggled")

    # The selector shows the other device: its own chart, title and numbers.
    Select(browser.find_element(By.ID, "device")).select_by_visible_text("cpu")
    time.sleep(0.5)
    assert "cpu" in browser.title and "cuda" not in browser.title
    assert browser.find_element(By.ID, "device-1").is_displayed()
    assert not browser.find_element(By.ID, "device-0").is_displayed()
    shot(browser, "report_cpu")
    # The peak can be a spike narrower than a pixel: zoomed in to the points
    # around it, hovering it shows it.
    cpu = data["devices"][1]
    k = cpu["t"].index(cpu["peak"]["us"])
    window = [cpu["t"][max(k - 2, 0)] / 1000, cpu["t"][min(k + 2, len(cpu["t"]) - 1)] / 1000]
    browser.execute_script("%s.updateOptions({dateWindow: arguments[0]})" % chart(browser, 1), window)
    hover(browser, 1, cpu["peak"]["us"] / 1000)
    when, shown, _ = legend(browser, 1)
    assert when == cpu["first_us"] + cpu["peak"]["us"]
    assert shown in sizes["cpu"][when] and sum(shown) == cpu["peak"]["bytes"]
    shot(browser, "report_cpu_peak_zoomed")

    # The memory tables sort by a column on a click, largest first, then the
    # other way.
    table = browser.find_element(By.CSS_SELECTOR, "#device-1 table.memory")
    header = table.find_element(By.XPATH, ".//th[text()='allocated, self']")
    col = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")].index("allocated, self")
    values = lambda: [int(r.find_elements(By.TAG_NAME, "td")[col].get_attribute("data-v"))  # noqa: E731
                      for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    header.click()
    assert values() == sorted(values(), reverse=True) and len(values()) > 3
    header.click()
    assert values() == sorted(values())
    modules = [r.find_element(By.TAG_NAME, "td").text
               for r in browser.find_elements(By.CSS_SELECTOR, "#device-1 table.memory")[1]
               .find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert any(m.startswith("Sequential_0 > Conv2d_0") for m in modules), modules
    browser.execute_script("arguments[0].scrollIntoView()", table)
    shot(browser, "report_table_sorted")


def flame_frames(driver, index):
    """The drawn frames of device `index`'s flame graph: rect, bytes, id, label."""
    return driver.execute_script("""
        return Array.prototype.map.call(
            document.querySelectorAll('#device-' + arguments[0] + ' .flame-frames .fr'), function (f) {
          var r = f.getBoundingClientRect();
          return {left: r.left, right: r.right, top: r.top, bytes: Number(f.getAttribute('data-bytes')),
                  id: Number(f.getAttribute('data-id')), text: f.textContent,
                  cut: f.scrollWidth > f.clientWidth, ellipsis: getComputedStyle(f).textOverflow};
        });""", index)


def test_flame_graph(report, browser):
    """The flame graph of the bytes alive at the peak: its root holds the
    peak's bytes, frames of a row never overlap, a cut label ends in an
    ellipsis, hovering a frame shows its bytes, clicking one zooms to it and
    the top frame or Reset zooms out; each device has its own."""
    html, _ = report
    browser.get("file://" + html)
    time.sleep(0.5)
    data = browser.execute_script("return window.memtlReport.data")
    box = browser.find_element(By.CSS_SELECTOR, "#device-0 .flame-frames")
    browser.execute_script("arguments[0].scrollIntoView()", box.find_element(By.XPATH, ".."))
    frames = flame_frames(browser, 0)
    assert len(frames) > 5
    root = frames[0]
    assert root["bytes"] == data["devices"][0]["peak"]["bytes"] and root["text"] == "all"
    width = box.rect["width"]
    assert abs((root["right"] - root["left"]) - width) < 1
    rows = {}
    for f in frames:
        rows.setdefault(round(f["top"]), []).append(f)
    for row in rows.values():
        row.sort(key=lambda f: f["left"])
        overlaps = [(a, b) for a, b in zip(row, row[1:]) if a["right"] > b["left"] + 0.5]
        assert not overlaps, overlaps
    assert all(f["ellipsis"] == "ellipsis" for f in frames) and any(f["text"] for f in frames[1:])
    shot(browser, "flame")

    # Hovering a leaf (a category) shows its bytes, exact and in units, its share and category.
    leaf = max((f for f in frames if f["top"] > root["top"] and f["text"] in CATEGORIES),
               key=lambda f: f["bytes"])
    el = browser.find_element(By.CSS_SELECTOR, "#device-0 .fr[data-id='%d']" % leaf["id"])
    ActionChains(browser).move_to_element(el).perform()
    time.sleep(0.2)
    info = browser.find_element(By.CSS_SELECTOR, "#device-0 .flame-info")
    assert int(info.get_attribute("data-bytes")) == leaf["bytes"]
    assert "{:,} bytes".format(leaf["bytes"]) in info.text and "% of the peak" in info.text
    assert "category: " + leaf["text"] in info.text
    shot(browser, "flame_hover")

    # Clicking the largest frame under the root zooms to it: it spans the
    # graph, and the others under the root are gone.
    child = max((f for f in frames if f["top"] > root["top"] and f["top"] < root["top"] + 20),
                key=lambda f: f["bytes"])
    browser.find_element(By.CSS_SELECTOR, "#device-0 .fr[data-id='%d']" % child["id"]).click()
    time.sleep(0.2)
    zoomed = flame_frames(browser, 0)
    z = [f for f in zoomed if f["id"] == child["id"]][0]
    assert abs((z["right"] - z["left"]) - width) < 1
    assert all(f["bytes"] <= child["bytes"] for f in zoomed if f["id"] != root["id"])
    reset = browser.find_element(By.CSS_SELECTOR, "#device-0 .flame-reset")
    assert reset.is_enabled()
    shot(browser, "flame_zoomed")
    # The top frame zooms out; so does Reset.
    browser.find_element(By.CSS_SELECTOR, "#device-0 .fr[data-id='%d']" % root["id"]).click()
    time.sleep(0.2)
    assert len(flame_frames(browser, 0)) == len(frames) and not reset.is_enabled()
    browser.find_element(By.CSS_SELECTOR, "#device-0 .fr[data-id='%d']" % child["id"]).click()
    reset.click()
    assert len(flame_frames(browser, 0)) == len(frames)

    # The other device has its own graph, drawn when shown.
    Select(browser.find_element(By.ID, "device")).select_by_visible_text("cpu")
    time.sleep(0.3)
    cpu = flame_frames(browser, 1)
    assert cpu and cpu[0]["bytes"] == data["devices"][1]["peak"]["bytes"]


def test_inferred_categories_are_labelled_so_but_unknown(browser):
    """A Kineto trace read alone has inferred categories: the chart's toggles
    say "(inferred)" after each category's name, but not after "unknown",
    which is no inference (as `memtl peak` prints it; report.js compared
    the name with "Unknown" and labelled it "unknown (inferred)")."""
    html = os.path.join(OUT, "kineto_e2e_adam.html")
    os.makedirs(OUT, exist_ok=True)
    subprocess.run([MEMTL, "export", os.path.join(ROOT, "fixtures", "kineto", "e2e_adam.kineto.json.gz"),
                    "-o", html, "--quiet"], check=True)
    browser.get("file://" + html)
    time.sleep(0.5)
    labels = [label.text for label in browser.find_elements(By.CSS_SELECTOR, "#device-0 .toggles label")]
    assert labels == [c + " (inferred)" for c in CATEGORIES[:7]] + ["unknown"], labels
    # The flame graph's leaves say so too.
    leaves = browser.execute_script("""
        return window.memtlFlame.graphs[0].tree.nodes.filter(function (n) {
          return !n.children.length; }).map(function (n) { return n.name; });""")
    assert leaves and all(n.endswith(" (inferred)") or n == "unknown" for n in leaves), leaves
    shot(browser, "report_inferred")


def test_what_would_help_and_the_whatif_page(browser):
    """The report's "What would help" table (a ResNet-18 step, which has
    blocks to checkpoint and state to shard): its rows, the most saved
    first, each with its flags and trust; and memtl whatif's own page,
    whose two curves are drawn inside the chart."""
    os.makedirs(OUT, exist_ok=True)
    trace = os.path.join(ROOT, "fixtures", "resnet18_sgd_step.trace.jsonl.gz")
    html = os.path.join(OUT, "resnet18_help.html")
    subprocess.run([MEMTL, "export", trace, "-o", html, "--quiet"], check=True)
    browser.get("file://" + html)
    time.sleep(0.5)
    heading = [h for h in browser.find_elements(By.CSS_SELECTOR, "#device-0 h2")
               if h.text == "What would help"]
    assert heading, "no What would help section"
    table = heading[0].find_element(By.XPATH, "following-sibling::table[1]")
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) >= 3
    saved = [int(r.find_elements(By.CSS_SELECTOR, "td")[2].get_attribute("data-v")) for r in rows]
    assert saved == sorted(saved, reverse=True) and saved[-1] > 0
    assert all(r.find_elements(By.CSS_SELECTOR, "td")[3].text.startswith("--") for r in rows)
    browser.execute_script("arguments[0].scrollIntoView()", heading[0])
    shot(browser, "report_what_would_help")

    page = os.path.join(OUT, "whatif.html")
    subprocess.run([MEMTL, "whatif", trace, "--checkpoint", "BasicBlock_*", "--shard", "optimizer=4",
                    "-o", page], check=True, capture_output=True)
    browser.get("file://" + page)
    time.sleep(0.3)
    svg = browser.find_element(By.CSS_SELECTOR, "svg.whatif")
    lines = svg.find_elements(By.TAG_NAME, "polyline")
    assert len(lines) == 2
    box = svg.rect
    for line in lines:
        r = line.rect
        assert r["x"] >= box["x"] and r["x"] + r["width"] <= box["x"] + box["width"] + 1
        assert r["y"] >= box["y"] and r["y"] + r["height"] <= box["y"] + box["height"] + 1
    shot(browser, "whatif_page")


HOSTILE = "<!--<script>"


def test_markup_from_the_trace_stays_text(browser, tmp_path):
    """A trace whose file name, op and module names carry "<!--<script>" and
    "</script>" (docs/reliability.md, "Markup from a trace"): the data block
    leaves the HTML parser no "<", so the page's own scripts still run (the
    chart draws, the selector and sorting work; before, "<!--<script>" in
    the data swallowed them), the names show as text, and the policy that
    lists the scripts by hash refuses none of them (Chromium logs a refused
    script as an error). The diff page of two such traces likewise."""
    os.makedirs(OUT, exist_ok=True)
    tmp = str(tmp_path)
    doubled = os.path.join(tmp, "doubled.trace.jsonl.gz")
    two_devices(os.path.join(ROOT, "fixtures", "e2e_adam.trace.jsonl.gz"), doubled, tmp)
    # The op reaches the tables, the module (the first Linear's) the chart's data too.
    op = "aten::empty" + HOSTILE + "</script><script>document.title='pwned'</script>"
    module = "Linear" + HOSTILE + "</script><img src=x onerror=\"document.title='pwned'\">_0"
    with gzip.open(doubled, "rt") as f:
        text = f.read().replace('"name":"aten::empty"', '"name":' + json.dumps(op))
    text = text.replace('"name":"nn.Module: Linear_0"', '"name":' + json.dumps("nn.Module: " + module))
    assert text.count(HOSTILE) > 2
    trace = os.path.join(tmp, "run " + HOSTILE + ".trace.jsonl.gz")  # no "/" in a file's name
    with gzip.open(trace, "wt") as f:
        f.write(text)
    html = os.path.join(OUT, "report_hostile.html")
    subprocess.run([MEMTL, "export", trace, "-o", html, "--quiet"], check=True)
    with open(html, encoding="utf-8") as f:
        page = f.read()
    start = page.index('<script id="memtl-data" type="application/json">')
    block = page[start:page.index("</script>", start)].split(">", 1)[1]
    assert "<" not in block and "\\u003c!--\\u003cscript\\u003e" in block
    assert "'unsafe-inline'; style-src" not in page and "script-src 'sha256-" in page

    browser.get_log("browser")  # drops what earlier pages logged
    browser.get("file://" + html)
    time.sleep(0.5)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    assert "pwned" not in browser.title
    data = browser.execute_script("return window.memtlReport && window.memtlReport.data")
    assert data, "report.js did not run"
    assert data["source"] == trace
    assert all(any(o[1].endswith(" > " + module) for o in d["ops"]) for d in data["devices"])
    assert [d["name"] for d in data["devices"]] == ["cuda:0", "cpu"]
    # The chart of the first device draws; the selector draws the second's.
    assert browser.execute_script("return !!window.memtlReport.charts[0]")
    assert canvas_of(browser, 0).size["width"] > 100
    Select(browser.find_element(By.ID, "device")).select_by_index(1)
    time.sleep(0.3)
    assert browser.find_element(By.ID, "device-1").is_displayed()
    assert not browser.find_element(By.ID, "device-0").is_displayed()
    assert browser.execute_script("return !!window.memtlReport.charts[1]")
    assert canvas_of(browser, 1).size["width"] > 100
    # The op's name is text in the tables, and they sort.
    table = browser.find_elements(By.CSS_SELECTOR, "#device-1 table.memory")[0]
    names = [r.find_element(By.TAG_NAME, "td").text for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert op in names, names
    header = table.find_elements(By.TAG_NAME, "th")[1]
    values = lambda: [int(r.find_elements(By.TAG_NAME, "td")[1].get_attribute("data-v"))  # noqa: E731
                      for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    header.click()
    assert values() == sorted(values(), reverse=True) and len(values()) > 3
    header.click()
    assert values() == sorted(values())
    assert browser.execute_script(
        "return document.querySelectorAll('script').length") == 4  # the page's own, none from a name
    # The module is a frame of the flame graph: zoomed to, its label is the
    # name as text, and no image but the plots came of it.
    shown = browser.execute_script("""
        var g = window.memtlFlame.graphs[1], name = arguments[0];
        var n = g.tree.nodes.filter(function (n) { return n.name === name; })[0];
        g.zoomTo(n);
        return document.querySelector('#device-1 .fr.zoom').textContent;""", module)
    assert shown == module
    assert browser.execute_script("return document.querySelectorAll('img:not(.plot)').length") == 0
    shot(browser, "report_hostile")

    # The diff page: its names as text, its one script run.
    diff = os.path.join(OUT, "diff_hostile.html")
    subprocess.run([MEMTL, "diff", trace, trace, "-o", diff], check=True, capture_output=True)
    browser.get("file://" + diff)
    time.sleep(0.3)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    assert HOSTILE in browser.find_element(By.TAG_NAME, "p").text
    table = browser.find_elements(By.CSS_SELECTOR, "table.sortable")[0]
    header = table.find_elements(By.TAG_NAME, "th")[1]
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
