# The one place the version is written: pyproject.toml reads it (scikit-build-core's
# regex provider) and CMakeLists.txt passes the same string to the memtl command.
__version__ = "0.2.0"
