"""Process images in a Python program (tests/ckpt/run.sh): libmpi_abi.so is loaded with
ctypes (dlopen, after main), so the restore runs when it is loaded again at import time.

    python3 image_prog.py LIBMPI IMAGE [kill]
"""
import ctypes
import os
import signal
import sys

lib = ctypes.CDLL(sys.argv[1])
data = [i * i for i in range(200000)]
table = {str(i): i for i in range(50000)}
print("before", sum(data) % 1000003, len(table))
restored = ctypes.c_int(-1)
rc = lib.MPIX_Steadfast_image_checkpoint(sys.argv[2].encode(), ctypes.byref(restored))
if rc != 0:
    sys.exit(3)
sys.stderr.write(f"checkpoint returned restored={restored.value}\n")
if len(sys.argv) > 3 and restored.value == 0:
    os.kill(os.getpid(), signal.SIGKILL)
data.extend(range(100000))
table.update({str(-i): i for i in range(1000)})
print("after", sum(data) % 1000003, len(table))
