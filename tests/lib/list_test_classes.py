"""list_test_classes.py DIR MODULE...: the classes of each MODULE (DIR/MODULE.py) that hold tests,
one `MODULE.Class` a line, for ctest entries of one class each (tests/CMakeLists.txt).

Read with ast, never imported: CMake runs this when it configures, where the tests' own
dependencies may not be installed yet. A class counts when it or one of its bases, in that file
or imported from another file of DIR, defines a method whose name starts with `test`."""
import ast
import os
import sys


def classes(directory, module, seen=None):
    """{name: (bases, own test count, module)} of the classes MODULE defines or imports from DIR."""
    seen = seen if seen is not None else {}
    if module in seen:
        return seen[module]
    seen[module] = found = {}
    path = os.path.join(directory, module + ".py")
    if not os.path.isfile(path):
        return found
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported = classes(directory, node.module, seen)
            for alias in node.names:
                if alias.name in imported:
                    found[alias.asname or alias.name] = imported[alias.name]
        elif isinstance(node, ast.ClassDef):
            tests = sum(1 for m in node.body if isinstance(m, ast.FunctionDef) and m.name.startswith("test"))
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            found[node.name] = (bases, tests, module, found)
    return found


def test_count(entry):
    bases, tests, _, scope = entry
    return tests + sum(test_count(scope[b]) for b in bases if b in scope)


def main():
    directory, modules = sys.argv[1], sys.argv[2:]
    for module in modules:
        for name, entry in classes(directory, module).items():
            if entry[2] == module and test_count(entry) > 0:
                print(f"{module}.{name}")


if __name__ == "__main__":
    main()
