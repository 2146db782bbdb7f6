"""Stand-ins for the environment packages ROLL v0.1.0 imports when its config module loads (its agentic config
imports every environment's module: gym, gym_sokoban, ...), which the oracle's venv does not install. The loader
reads the config's dataclasses and never runs an environment; a stubbed module hands out an empty class for any name
asked of it."""

import importlib.abc
import importlib.machinery
import sys
import types

STUBBED = ("gym", "gymnasium", "gym_sokoban", "textworld", "alfworld", "matplotlib", "imageio")


class _Anything(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {"__init__": lambda self, *args, **kwargs: None})
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Anything(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, _Finder())
