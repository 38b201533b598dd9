"""The c10d tests (backend "kolo" for torch.distributed) run in processes of their
own (CTest python.c10d.np2/np3), not in the pytest session of tests/python: the
backend registers kolo process sets for its groups and their pairs of ranks, and
kolo refuses a second set of the same ranks, which the Horovod-API process-set
tests there add themselves."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "..", "bindings", "python")))
