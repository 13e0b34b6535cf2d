"""Finding the modules of a package that declare themselves: kernel families by ``KIND``, ops by
``OP``. A new one is a module in the package, nothing to register."""

import importlib
import pkgutil


def by_attribute(package: str, path, attribute: str) -> dict:
    """The modules of ``package`` (its ``__path__``) that have ``attribute``, keyed by its value, in
    the order of their module names; two modules with one value are an ImportError naming both."""
    found = {}
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{info.name}")
        value = getattr(module, attribute, None)
        if value is None:
            continue
        if value in found:
            raise ImportError(f"{found[value].__name__} and {module.__name__} both have {attribute} {value!r}")
        found[value] = module
    return found
