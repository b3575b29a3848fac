"""Checks built documentation pages in headless Chromium, as a reader's window shows them.

    python -m tools.page_check BUILT_HTML_FOLDER [--max-height results.html=3200 ...]

It builds nothing: it takes a folder that ``sphinx -b html`` wrote and opens
each page of ``PAGES`` in a 1280 x 800 window. On each page it measures the
page's height, and every table and every code block (``pre``) against the box
that holds it: a table whose
width (``scrollWidth``) exceeds its container's (``clientWidth``) is wider than
the text column and scrolls sideways; a ``pre`` whose content is wider than its
box is cut. Each such element is an offender, and so is a page taller than its
limit. It prints every page's numbers and exits 1 naming each offender.

How it measures without a browser driver: each page is copied to a temporary
folder with a ``<base>`` pointing back at the built folder (so its style sheets
and images load) and a script that, once the page has loaded, writes its
measurements as JSON into the DOM; ``chromium --headless --dump-dom`` prints that
DOM, and the JSON is read back out of it.
"""

from __future__ import annotations

import argparse
import html
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

PAGES = ("results.html", "results_appendix.html", "index.html",
         "howto.html", "choosing_lr.html", "algorithm.html", "api.html", "examples.html")
WIDTH, HEIGHT = 1280, 800
# The results page is read in at most four screens; the appendix is for lookup.
MAX_HEIGHT = {"results.html": 4 * HEIGHT}
MARKER = "page-check-result"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=10000")

# Runs once the page and its images have loaded; the 1 px slack absorbs rounding.
MEASURE = """
<script>
window.addEventListener("load", function () {
  setTimeout(function () {
    function where(el) {
      var heading = null, node = el;
      while (node && !heading) {
        var prev = node.previousElementSibling;
        while (prev && !/^H[1-6]$/.test(prev.tagName) && !prev.querySelector("h1,h2,h3,h4")) {
          prev = prev.previousElementSibling;
        }
        if (prev) {
          var hs = /^H[1-6]$/.test(prev.tagName) ? [prev] : prev.querySelectorAll("h1,h2,h3,h4");
          heading = hs[hs.length - 1];
        }
        node = node.parentElement;
      }
      return heading ? heading.textContent.replace(/[\\s\\u00b6#]+$/, "").trim() : "(top)";
    }
    function box(el) {
      var holder = el.parentElement;
      while (holder && holder.clientWidth === 0) { holder = holder.parentElement; }
      return holder;
    }
    var article = document.querySelector("article") || document.body;
    var out = {height: document.documentElement.scrollHeight, viewport: window.innerWidth,
               column: article.clientWidth, tables: [], pres: [], headings: []};
    document.querySelectorAll("article h1, article h2, article h3").forEach(function (h) {
      out.headings.push({level: +h.tagName[1], top: Math.round(h.getBoundingClientRect().top
                         + window.scrollY), title: h.textContent.replace(/[\u00b6#]+$/, "").trim()});
    });
    document.querySelectorAll("article table").forEach(function (t, i) {
      var holder = box(t);
      var head = t.querySelector("th, td");
      out.tables.push({index: i, width: t.scrollWidth, box: holder.clientWidth,
                       columns: t.rows.length ? t.rows[0].cells.length : 0,
                       first: head ? head.textContent.trim().slice(0, 40) : "",
                       section: where(t)});
    });
    document.querySelectorAll("article pre").forEach(function (p, i) {
      out.pres.push({index: i, width: p.scrollWidth, box: p.clientWidth,
                     first: p.textContent.trim().split("\\n")[0].slice(0, 60),
                     section: where(p)});
    });
    var node = document.createElement("script");
    node.type = "application/json";
    node.id = "MARKER";
    node.textContent = JSON.stringify(out);
    document.body.appendChild(node);
  }, 0);
});
</script>
""".replace("MARKER", MARKER)


def chromium() -> str:
  for name in ("chromium", "chromium-browser", "google-chrome"):
    found = shutil.which(name)
    if found:
      return found
  raise SystemExit("page_check: no chromium on PATH (apt-get install chromium)")


def prepared(page: pathlib.Path, folder: pathlib.Path) -> str:
  """The page's HTML with a ``<base>`` at the built folder and the measuring script."""
  text = page.read_text()
  base = f'<base href="{folder.resolve().as_uri()}/">'
  text = re.sub(r"<head([^>]*)>", lambda m: f"<head{m.group(1)}>{base}", text, count=1)
  return text.replace("</body>", MEASURE + "</body>", 1)


def measure(page: pathlib.Path, folder: pathlib.Path, browser: str) -> dict:
  """The page's measurements, as the script in it wrote them."""
  with tempfile.TemporaryDirectory(prefix="page-check-") as scratch:
    copy = pathlib.Path(scratch) / page.name
    copy.write_text(prepared(page, folder))
    profile = pathlib.Path(scratch) / "profile"
    run = subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
         "--dump-dom", copy.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
  found = re.search(f'<script type="application/json" id="{MARKER}">(.*?)</script>',
                    run.stdout, re.S)
  if not found:
    raise RuntimeError(f"{page.name}: no measurements came back (chromium exit "
                       f"{run.returncode}): {run.stderr[-2000:]}")
  return json.loads(html.unescape(found.group(1)))


def offenders(name: str, m: dict, max_height: int | None) -> list[str]:
  out = []
  if max_height is not None and m["height"] > max_height:
    out.append(f"{name}: the page is {m['height']} px tall, over its {max_height} px")
  for t in m["tables"]:
    if t["width"] > t["box"] + 1:
      out.append(f"{name}: table {t['index']} in '{t['section']}' ({t['columns']} columns, "
                 f"first cell '{t['first']}') is {t['width']} px wide in a {t['box']} px box")
  for p in m["pres"]:
    if p["width"] > p["box"] + 1:
      out.append(f"{name}: code block {p['index']} in '{p['section']}' ('{p['first']}') is cut: "
                 f"{p['width']} px of content in a {p['box']} px box")
  return out


def _limits(values: list[str]) -> dict[str, int]:
  limits = dict(MAX_HEIGHT)
  for value in values:
    page, _, px = value.partition("=")
    limits[page] = int(px)
  return limits


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m tools.page_check",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("folder", type=pathlib.Path, help="the built HTML folder")
  parser.add_argument("--pages", nargs="*", default=list(PAGES))
  parser.add_argument("--max-height", nargs="*", default=[], metavar="PAGE=PX",
                      help="a page's height limit (default: results.html="
                           f"{MAX_HEIGHT['results.html']})")
  parser.add_argument("--json", type=pathlib.Path, default=None,
                      help="also write every page's measurements to this file")
  args = parser.parse_args(argv)
  limits = _limits(args.max_height)
  browser = chromium()
  t0 = time.perf_counter()
  problems = []
  measured = {}
  for name in args.pages:
    page = args.folder / name
    if not page.exists():
      problems.append(f"{name}: not in {args.folder}")
      continue
    m = measure(page, args.folder, browser)
    measured[name] = m
    widest = max([t["width"] for t in m["tables"]] or [0])
    print(f"{name}: {m['height']} px tall ({m['height'] / HEIGHT:.1f} screens of "
          f"{WIDTH}x{HEIGHT}), text column {m['column']} px, {len(m['tables'])} tables "
          f"(widest {widest} px), {len(m['pres'])} code blocks")
    problems += offenders(name, m, limits.get(name))
  if args.json:
    args.json.write_text(json.dumps(measured, indent=1))
  for line in problems:
    print("  " + line)
  print(f"{len(problems)} problem(s) in {time.perf_counter() - t0:.1f} s")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main())
