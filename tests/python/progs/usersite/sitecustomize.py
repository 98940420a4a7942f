# tests/python: the program's own sitecustomize, which `run --layers` must keep running
import os

os.environ["PY_TEST_USER_SITECUSTOMIZE"] = "ran"
