"""tests/python: prints what --layers and --torch-alloc set up (no torch needed)."""
import os
import sys

print("conf=" + os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "<unset>"))
print("alloc_conf=" + os.environ.get("PYTORCH_ALLOC_CONF", "<unset>"))
print("user_site=" + os.environ.get("PY_TEST_USER_SITECUSTOMIZE", "<not run>"))
print("site=" + getattr(sys.modules.get("sitecustomize"), "__file__", "<none>"))
print("watcher=" + str(any(type(f).__name__ == "_TorchWatcher" for f in sys.meta_path)))
print("watchers=%d" % sum(type(f).__name__ == "_TorchWatcher" for f in sys.meta_path))
