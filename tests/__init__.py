"""The test suite (a package, so that test modules import their shared helpers as ``tests.helpers``)."""
