import glob
from setuptools import setup
from Cython.Build import cythonize
mods = [m for m in glob.glob("controller_core/*.py") if not m.endswith("__init__.py")]
setup(ext_modules=cythonize(mods, language_level=3, nthreads=2,
      compiler_directives={"binding": True, "annotation_typing": False, "embedsignature": False}),
      script_args=["build_ext", "--inplace", "-j", "2"])
