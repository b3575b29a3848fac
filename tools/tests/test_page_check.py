"""``tools/page_check.py``: what it names as an offender, and a page it measures for
real in Chromium (a table and a code block too wide for the column, a page over its
height).
"""

import shutil

from tools import page_check


def test_it_names_each_offender_and_a_page_over_its_height():
  m = {"height": 7000,
       "tables": [{"index": 0, "width": 688, "box": 688, "columns": 3, "first": "a",
                   "section": "S"},
                  {"index": 1, "width": 900, "box": 688, "columns": 12, "first": "optimizer",
                   "section": "Details"}],
       "pres": [{"index": 0, "width": 740, "box": 686, "first": "import jax", "section": "Top"},
                {"index": 1, "width": 687, "box": 686, "first": "x = 1", "section": "Top"}]}
  assert page_check.offenders("results.html", m, 6400) == [
      "results.html: the page is 7000 px tall, over its 6400 px",
      "results.html: table 1 in 'Details' (12 columns, first cell 'optimizer') is 900 px "
      "wide in a 688 px box",
      "results.html: code block 0 in 'Top' ('import jax') is cut: 740 px of content in a "
      "686 px box"]
  assert page_check.offenders("index.html", m | {"tables": [], "pres": []}, None) == []


def test_the_copy_loads_from_the_built_folder_and_carries_the_script(tmp_path):
  page = tmp_path / "p.html"
  page.write_text("<html><head><title>t</title></head><body><p>x</p></body></html>")
  text = page_check.prepared(page, tmp_path)
  assert f'<head><base href="{tmp_path.resolve().as_uri()}/">' in text
  assert text.index(page_check.MARKER) < text.index("</body>")


def test_it_measures_a_page_in_chromium(tmp_path, capsys):
  assert shutil.which("chromium"), ("this test needs Debian's chromium (apt-get install "
                                    "chromium); .ci/paperwork installs it")
  wide = "".join(f"<td>column_number_{i}</td>" for i in range(14))
  (tmp_path / "results.html").write_text(
      "<html><head></head><body><article><h2>Wide</h2><table><tr>" + wide
      + "</tr></table><pre style='overflow:auto'>" + "x" * 300 + "</pre>"
      + "<div style='height:9000px'></div></article></body></html>")
  assert page_check.main([str(tmp_path), "--pages", "results.html"]) == 1
  out = capsys.readouterr().out
  assert "results.html: table 0 in 'Wide' (14 columns" in out
  assert "results.html: code block 0 in 'Wide'" in out
  assert "results.html: the page is" in out and "over its 3200 px" in out  # four screens
