"""Checks that every public function of a package has type hints.

    python check_type_hints.py [--path DIR] [PACKAGE]     (default: ds_torch)

Public: a module-level function whose name does not start with `_`, and the
methods (properties included) of a module-level class whose name does not
start with `_`: those whose names do not start with `_`, and `__init__`.
Only what the package's modules define counts, not what they import. Every
parameter (bar a method's `self`/`cls`, `*args` and `**kwargs` included)
needs an annotation, and so does the return (`-> None` included); the hints
must also resolve (typing.get_type_hints), so that a misspelt name fails.

Prints one line per missing or broken hint and exits 1 if there is any;
else prints how many functions it checked and exits 0.
"""

import argparse
import importlib
import inspect
import pkgutil
import sys
import typing


def public_functions(module):
    """(qualified name, function, is_method) defined by `module`."""
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            yield "%s.%s" % (module.__name__, name), obj, False
        elif inspect.isclass(obj):
            for attr, member in sorted(vars(obj).items()):
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(member, property):
                    member = member.fget
                elif isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isfunction(member):
                    is_method = not isinstance(vars(obj)[attr], staticmethod)
                    yield ("%s.%s.%s" % (module.__name__, name, attr), member,
                           is_method)


def problems(qualname, fn, is_method):
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if is_method and params:
        params = params[1:]  # self, cls
    for p in params:
        if p.annotation is inspect.Parameter.empty:
            yield "%s: parameter '%s' has no type hint" % (qualname, p.name)
    if sig.return_annotation is inspect.Signature.empty:
        yield "%s: the return has no type hint" % qualname
    try:
        typing.get_type_hints(fn)
    except Exception as e:  # NameError, TypeError, ...
        yield "%s: the type hints do not resolve: %s: %s" % (
            qualname, type(e).__name__, e)


def modules_of(package_name):
    package = importlib.import_module(package_name)
    yield package
    for info in pkgutil.walk_packages(package.__path__, package_name + "."):
        yield importlib.import_module(info.name)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", nargs="?", default="ds_torch")
    ap.add_argument("--path", action="append", default=[],
                    help="a directory to put in front of sys.path")
    args = ap.parse_args(argv)
    sys.path[:0] = args.path
    checked, found = 0, []
    for module in modules_of(args.package):
        for qualname, fn, is_method in public_functions(module):
            checked += 1
            found.extend(problems(qualname, fn, is_method))
    for line in found:
        print("check_type_hints: " + line)
    if found:
        print("check_type_hints: %d missing or broken hints in %s"
              % (len(found), args.package))
        return 1
    if not checked:
        print("check_type_hints: %s defines no public function" % args.package)
        return 1
    print("check_type_hints: %d public functions of %s, all hinted"
          % (checked, args.package))
    return 0


if __name__ == "__main__":
    sys.exit(main())
