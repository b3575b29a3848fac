"""Builds the compiled XLA:CPU loop, ``vsgd_optax/_cpu_kernel.cc``.

Everything else about the package is in ``pyproject.toml``. The loop is
compiled against the XLA FFI headers that jaxlib ships (a build requirement),
and records that jaxlib's version so that ``vsgd_optax/_cpu_kernel.py`` can
refuse an older jaxlib at run time. It is optional: without a C++17 compiler
the package installs without it, and XLA:CPU runs the steps written in JAX.
"""

import importlib.metadata
import importlib.util
import os
import sys

from setuptools import Extension, setup


def _compiled_loop() -> list[Extension]:
  spec = importlib.util.find_spec("jaxlib")
  if spec is None or not spec.submodule_search_locations:
    print("vsgd_optax: jaxlib is not installed in the build environment; "
          "building without the compiled XLA:CPU loop.", file=sys.stderr)
    return []
  headers = os.path.join(spec.submodule_search_locations[0], "include")
  jaxlib_version = importlib.metadata.version("jaxlib")
  if sys.platform == "win32":
    flags = ["/std:c++17", "/O2"]
  else:
    # -fno-math-errno lets sqrt vectorize; it changes no result.
    flags = ["-std=c++17", "-O3", "-fno-math-errno"]
  return [Extension(
      "vsgd_optax._cpu_kernel_lib",
      sources=["vsgd_optax/_cpu_kernel.cc"],
      include_dirs=[headers],
      define_macros=[("VSGD_OPTAX_JAXLIB_VERSION", f'"{jaxlib_version}"')],
      extra_compile_args=flags,
      language="c++",
      optional=True,
  )]


setup(ext_modules=_compiled_loop())
