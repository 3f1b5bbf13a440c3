"""Arrays handed to libpskv: numpy float32 arrays and torch CPU float32 tensors
(contiguous) for values, uint64 or non-negative int64 for keys.

Nothing is converted behind the caller's back: a value array of another dtype,
layout or device raises TypeError or ValueError naming the argument, before
anything is sent. The functions return the address the library reads or writes
and the number of elements; the caller keeps the object alive as long as the
library may touch it. torch is never imported here: a tensor is recognised by
its type's module.
"""

import ctypes

import numpy as np

_U64 = np.dtype(np.uint64)
_I64 = np.dtype(np.int64)
_F32 = np.dtype(np.float32)
_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer


def _is_tensor(a):
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


def values(a, arg, writable=False):
    """(address, count) of the float32 values in a; a is a numpy array or a torch
    tensor. Raises TypeError (not an array, wrong dtype, GPU) or ValueError (not
    contiguous, read-only when writable is asked)."""
    if type(a) is np.ndarray:
        if a.dtype != _F32:
            raise TypeError("%s: numpy dtype %s, expected float32" % (arg, a.dtype))
        fl = a.flags
        if not fl.c_contiguous:
            raise ValueError("%s: the array is not contiguous (use np.ascontiguousarray)" % arg)
        if fl.writeable and a.size:
            # through the buffer protocol: a third of a.ctypes.data's time (the
            # temporary ctypes object lets go of the buffer at once)
            return _addressof(_from_buffer(a)), a.size
        if writable:
            raise ValueError("%s: the array is read-only" % arg)
        return a.ctypes.data, a.size
    if _is_tensor(a):
        if a.device.type != "cpu":
            raise TypeError("%s: a tensor on %s; pskv takes CPU tensors (call .cpu())"
                            % (arg, a.device))
        if str(a.dtype) != "torch.float32":
            raise TypeError("%s: tensor dtype %s, expected torch.float32" % (arg, a.dtype))
        if not a.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous (call .contiguous())" % arg)
        if a.requires_grad and writable and a.is_leaf:
            raise ValueError("%s: a leaf tensor that requires grad; pass tensor.data" % arg)
        return a.data_ptr(), a.numel()
    if isinstance(a, np.ndarray):  # a subclass (np.matrix, memmap): its data is an ndarray's
        return values(a.view(np.ndarray), arg, writable)
    raise TypeError("%s: expected a numpy float32 array or a torch float32 CPU tensor, "
                    "got %s" % (arg, type(a).__name__))


def keys(k, arg="keys"):
    """(address, count, keepalive) of uint64 keys. k: None (a dense table's every
    key: address 0), a numpy uint64 or int64 array, a torch int64 tensor, or a
    sequence of ints (copied). Negative keys raise ValueError naming arg."""
    if k is None:
        return 0, 0, None
    if _is_tensor(k):
        if k.device.type != "cpu":
            raise TypeError("%s: a tensor on %s; pskv takes CPU tensors" % (arg, k.device))
        if str(k.dtype) != "torch.int64":
            raise TypeError("%s: tensor dtype %s, expected torch.int64" % (arg, k.dtype))
        if not k.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous" % arg)
        if k.numel() and int(k.min()) < 0:
            raise ValueError("%s: negative key %d" % (arg, int(k.min())))
        return k.data_ptr(), k.numel(), k
    if not isinstance(k, np.ndarray):
        if isinstance(k, (list, tuple, range)):
            if any(not isinstance(x, (int, np.integer)) for x in k):
                raise TypeError("%s: keys must be integers" % arg)
            if any(x < 0 for x in k):
                raise ValueError("%s: negative key %d" % (arg, min(k)))
            k = np.array(k, dtype=np.uint64)
        else:
            raise TypeError("%s: expected a numpy uint64/int64 array, a torch int64 tensor or "
                            "a list of ints, got %s" % (arg, type(k).__name__))
    if k.dtype == _I64:
        if k.size and k.min() < 0:
            raise ValueError("%s: negative key %d" % (arg, int(k.min())))
    elif k.dtype != _U64:
        raise TypeError("%s: numpy dtype %s, expected uint64 or int64" % (arg, k.dtype))
    if k.ndim != 1 or not k.flags.c_contiguous:
        raise ValueError("%s: keys must be one contiguous dimension, got shape %s"
                         % (arg, k.shape))
    return k.ctypes.data, k.size, k
