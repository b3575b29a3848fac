"""Sphinx configuration: autodoc + napoleon for the API, MyST for the pages, and
MyST-NB, which executes the getting-started notebook at every build (an error in
it fails the build), so that it cannot rot.

The theme is optax's and Flax's (``sphinx-book-theme``). MathJax is served from
the built site (``sphinx-mathjax-offline`` copies it into ``_static``), so the
equations render without a network.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import vsgd_optax  # noqa: E402

project = "vsgd_optax"
author = "vsgd_optax developers"
release = vsgd_optax.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.doctest",
              "sphinx.ext.mathjax", "sphinx-mathjax-offline", "myst_nb"]
myst_enable_extensions = ["dollarmath"]
# Anchors for headings down to level 2, which the README and the home page link to.
myst_heading_anchors = 2
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 600
exclude_patterns = ["_build", "jupyter_execute"]
html_theme = "sphinx_book_theme"
html_title = "vsgd_optax"
html_theme_options = {"show_toc_level": 2, "home_page_in_toc": True}
# Tables: a smaller font and padding (docs/_static/tables.css), and sideways scrolling
# where that is not enough.
html_static_path = ["_static"]
html_css_files = ["tables.css"]
autodoc_typehints = "description"
autodoc_member_order = "bysource"
doctest_global_setup = "import jax, jax.numpy as jnp, optax, vsgd_optax"
nitpicky = False


def _check_public_api_is_documented(app):
  """Fails the build when a public name has no docstring or no API entry."""
  with open(os.path.join(app.srcdir, "api.md")) as f:
    api_page = f.read()
  missing = [name for name in vsgd_optax.__all__
             if not (getattr(vsgd_optax, name).__doc__ or "").strip()
             or f"vsgd_optax.{name}" not in api_page]
  if missing:
    raise RuntimeError(f"public names without documentation in api.md: {missing}")


def setup(app):
  app.connect("builder-inited", _check_public_api_is_documented)
