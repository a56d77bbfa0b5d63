#!/usr/bin/env python3
"""Generate Steadfast's Fortran bindings from the C headers and fortran/bindings.txt.

Writes, into OUTDIR:
  mpi_fortran_gen.c  C glue: one function per MPI call, converting Fortran INTEGER handles,
                     LOGICALs, blank-padded strings and the MPI_BOTTOM/MPI_IN_PLACE/
                     MPI_STATUS_IGNORE... sentinels (symbol `mpi_send_`, with the
                     `pmpi_send_`, `mpi_send_f08_` and `pmpi_send_f08_` aliases)
  mpif.h             constants and function declarations (fixed and free source form)
  mpi_consts.f90     the constants for `module mpi` (integer handles)
  mpi_ifaces.f90     explicit interfaces for `module mpi`
  mpi_f08_consts.f90 the constants for `module mpi_f08` (TYPE(MPI_Comm)... handles)
  mpi_f08_ifaces.f90 generic interfaces for `module mpi_f08` (large-count forms included)
  report.txt         functions without a binding, and why

Usage: gen.py --include DIR --exports FILE --out OUTDIR [--report]
EXPORTS lists the library's exported symbols (one per line), e.g. from `nm -D --defined-only`.
"""
import argparse
import os
import re
import sys

HANDLE_KINDS = {  # C type -> (index in the conversion tables, conversion prefix, f08 type)
    "MPI_Comm": (0, "Comm"), "MPI_Datatype": (1, "Type"), "MPI_Errhandler": (2, "Errhandler"),
    "MPI_File": (3, "File"), "MPI_Group": (4, "Group"), "MPI_Info": (5, "Info"),
    "MPI_Message": (6, "Message"), "MPI_Op": (7, "Op"), "MPI_Request": (8, "Request"),
    "MPI_Session": (9, "Session"), "MPI_Win": (10, "Win"),
}
NULL_HANDLE = {"MPI_Comm": "MPI_COMM_NULL", "MPI_Datatype": "MPI_DATATYPE_NULL",
               "MPI_Errhandler": "MPI_ERRHANDLER_NULL", "MPI_File": "MPI_FILE_NULL",
               "MPI_Group": "MPI_GROUP_NULL", "MPI_Info": "MPI_INFO_NULL",
               "MPI_Message": "MPI_MESSAGE_NULL", "MPI_Op": "MPI_OP_NULL",
               "MPI_Request": "MPI_REQUEST_NULL", "MPI_Session": "MPI_SESSION_NULL",
               "MPI_Win": "MPI_WIN_NULL"}
INT_KINDS = {"int": "integer", "MPI_Aint": "integer(kind=8)", "MPI_Count": "integer(kind=8)",
             "MPI_Offset": "integer(kind=8)"}


def read_annotations(path):
    ann = {"logical": set(), "integer": set(), "release": {}, "length": {}, "custom": set(),
           "skip": set(), "index": {}}
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        word, rest = line[0], line[1:]
        if word == "logical":
            ann["logical"].update(rest)
        elif word == "integer":
            ann["integer"].add((rest[0], rest[1]))
        elif word == "release":
            ann["release"].setdefault(rest[0], set()).update(rest[1:])
        elif word == "index":
            ann["index"].setdefault(rest[0], {})[rest[1]] = rest[2] if len(rest) > 2 else None
        elif word == "length":
            ann["length"][rest[0]] = rest[1:]
        elif word in ("custom", "skip"):
            ann[word].update(rest)
        else:
            sys.exit(f"bindings.txt: unknown line kind {word!r}")
    return ann


PROTO = re.compile(r"^(int|double) (MPIX?_[A-Za-z0-9_]+)\((.*)\);")


def read_prototypes(include):
    protos = {}
    for hdr in ("mpi.h", "mpi-ext.h"):
        for line in open(os.path.join(include, hdr)):
            m = PROTO.match(line.strip().split("/*")[0].strip())
            if m:
                protos.setdefault(m.group(2), (m.group(1), m.group(3)))
    return protos


def parse_arg(text):
    """'const MPI_Datatype sendtypes[]' -> (ctype, name, pointer_level, is_array, const)."""
    text = text.strip()
    const = text.startswith("const ")
    if const:
        text = text[6:]
    array = text.endswith("]")
    if array:
        text = text[:text.index("[")]
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_ ]*?)\s*(\**)\s*([A-Za-z_][A-Za-z0-9_]*)$", text)
    if not m:
        return None
    return m.group(1).strip(), m.group(3), len(m.group(2)), array, const


class Unsupported(Exception):
    pass


def classify(fname, args, ann):
    """List of (class, ctype, name, extra) per argument; raises Unsupported."""
    out = []
    names = [a[1] for a in args]
    for ctype, name, ptr, array, const in args:
        logical = name in ann["logical"] and (fname, name) not in ann["integer"]
        if ctype == "void" and ptr == 1 and not array:
            if name in ("attribute_val", "attribute_val_in", "attribute_val_out",
                        "extra_state", "baseptr", "user_data", "buffer_addr"):
                raise Unsupported(f"void * argument {name}")
            out.append(("buf", ctype, name, None))
        elif ctype in INT_KINDS and ptr == 0 and not array:
            out.append(("lval" if logical else "ival", ctype, name, None))
        elif ctype == "double" and ptr == 0 and not array:
            out.append(("dval", ctype, name, None))
        elif ctype in INT_KINDS and ptr + array == 1:
            kind = "lptr" if logical else "iptr"
            out.append((kind, ctype, name, "array" if array else None))
        elif ctype in HANDLE_KINDS and ptr == 0 and not array:
            out.append(("hin", ctype, name, None))
        elif ctype in HANDLE_KINDS and ptr == 1 and not array:
            out.append(("hout", ctype, name, None))
        elif ctype in HANDLE_KINDS and ptr == 0 and array:
            length = None
            for cand in ann["length"].get(name, []):
                if cand in ("commsize",) and "comm" in names:
                    length = "neighbor" if "eighbor" in fname else "commsize"
                    break
                if cand in names:
                    length = cand
                    break
            if length is None:
                raise Unsupported(f"handle array {name} without a length")
            out.append(("harr_in" if const else "harr", ctype, name, length))
        elif ctype == "MPI_Status" and ptr + array == 1:
            out.append(("statuses" if array else "status", ctype, name, None))
        elif ctype == "char" and ptr + array == 1:
            out.append(("sin" if const else "sout", ctype, name, None))
        else:
            raise Unsupported(f"argument {'const ' if const else ''}{ctype} "
                              f"{'*' * ptr}{name}{'[]' if array else ''}")
    return out


def fortran_name(cname):
    return cname  # gfortran lower-cases and appends one underscore


def c_glue(fname, ret, cls, ann):
    sym = fname.lower() + "_"
    params, hidden, pre, call, post = [], [], [], [], []
    kind_of = lambda t: HANDLE_KINDS[t]
    release = ann["release"].get(fname, set())
    for c, ctype, name, extra in cls:
        v = "f_" + name
        if c == "buf":
            params.append(f"void *{v}")
            call.append(f"F_BUF({v})")
        elif c in ("ival", "lval"):
            ft = "MPI_Fint" if ctype == "int" else ctype
            params.append(f"{ft} *{v}")
            call.append(f"*{v}")
        elif c == "dval":
            params.append(f"double *{v}")
            call.append(f"*{v}")
        elif c in ("iptr", "lptr"):
            ft = "MPI_Fint" if ctype == "int" else ctype
            params.append(f"{ft} *{v}")
            call.append(f"F_INTS({v})" if ctype == "int" else f"{v}")
            if c == "lptr" and extra is None:
                post.append(f"if ({v}) *{v} = F_LOGICAL(*{v});")
            idx = ann["index"].get(fname, {})
            if name in idx:
                if idx[name]:
                    post.append(f"if (rc == MPI_SUCCESS && *f_{idx[name]} != MPI_UNDEFINED)")
                    post.append(f"    for (int i = 0; i < *f_{idx[name]}; i++) {v}[i] += 1;")
                else:
                    post.append(f"if (rc == MPI_SUCCESS && *{v} >= 0) *{v} += 1;")
        elif c == "hin":
            idx, pfx = kind_of(ctype)
            params.append(f"MPI_Fint *{v}")
            call.append(f"MPI_{pfx}_f2c(*{v})")
        elif c == "hout":
            idx, pfx = kind_of(ctype)
            params.append(f"MPI_Fint *{v}")
            pre.append(f"{ctype} c_{name} = MPI_{pfx}_f2c(*{v});")
            pre.append(f"{ctype} c0_{name} = c_{name};")
            call.append(f"&c_{name}")
            post.append(f"if (c_{name} != c0_{name}) {{")
            if name in release:
                post.append(f"    steadfast_fint_release({idx}, *{v});")
            post.append(f"    *{v} = MPI_{pfx}_c2f(c_{name});")
            post.append("}")
        elif c in ("harr", "harr_in"):
            idx, pfx = kind_of(ctype)
            params.append(f"MPI_Fint *{v}")
            if extra in ("commsize", "neighbor"):
                which = "0"
                if extra == "neighbor":
                    which = "1" if name.startswith("send") else "2"
                n = f"glue_comm_len(MPI_Comm_f2c(*f_comm), {which})"
            else:
                n = f"(int)*f_{extra}"
            pre.append(f"int n_{name} = {n};")
            pre.append(f"{ctype} *c_{name} = glue_alloc(n_{name}, sizeof({ctype}));")
            pre.append(f"for (int i = 0; i < n_{name}; i++) "
                       f"c_{name}[i] = MPI_{pfx}_f2c({v}[i]);")
            call.append(f"c_{name}")
            if c == "harr":
                post.append(f"for (int i = 0; i < n_{name}; i++) {{")
                post.append(f"    if (c_{name}[i] == MPI_{pfx}_f2c({v}[i])) continue;")
                if name in release:
                    post.append(f"    steadfast_fint_release({idx}, {v}[i]);")
                post.append(f"    {v}[i] = MPI_{pfx}_c2f(c_{name}[i]);")
                post.append("}")
            post.append(f"glue_free(c_{name});")
        elif c == "status":
            params.append(f"MPI_Fint *{v}")
            call.append(f"F_STATUS({v})")
        elif c == "statuses":
            params.append(f"MPI_Fint *{v}")
            call.append(f"F_STATUSES({v})")
        elif c == "sin":
            params.append(f"const char *{v}")
            hidden.append(f"size_t len_{name}")
            # Info keys and values lose leading blanks too (MPI standard, Info chapter).
            trim = "glue_cstr_info" if fname.startswith("MPI_Info_") else "glue_cstr"
            pre.append(f"char *c_{name} = {trim}({v}, len_{name});")
            call.append(f"c_{name}")
            post.append(f"free(c_{name});")
        elif c == "sout":
            params.append(f"char *{v}")
            hidden.append(f"size_t len_{name}")
            pre.append(f"char *c_{name} = glue_strbuf({v}, len_{name});")
            call.append(f"c_{name}")
            post.append(f"glue_fstr(c_{name}, {v}, len_{name});")
            post.append(f"free(c_{name});")
    lines = []
    # mpi_x_ calls MPI_X (a C profiling library sees Fortran calls, as with MPICH);
    # pmpi_x_ calls PMPI_X. The mpi_f08 names are aliases of the two.
    for fsym, target in ((sym, fname), ("p" + sym, "P" + fname)):
        if ret == "double":
            lines.append(f"double {fsym}({', '.join(params) or 'void'})\n{{")
            lines.append(f"    return {target}({', '.join(call)});")
            lines.append("}")
        else:
            plist = params + ["MPI_Fint *ierror"] + hidden
            lines.append(f"void {fsym}({', '.join(plist)})\n{{")
            for p in pre:
                lines.append("    " + p)
            lines.append(f"    int rc = {target}({', '.join(call)});")
            for p in post:
                lines.append("    " + p)
            lines.append("    if (ierror) *ierror = rc;")
            lines.append("}")
    base = fname.lower()
    lines.append(f'extern __typeof__({sym}) {base}_f08_ __attribute__((alias("{sym}")));')
    lines.append(f'extern __typeof__({sym}) p{base}_f08_ __attribute__((alias("p{sym}")));')
    return "\n".join(lines) + "\n"


def f_decl(c, ctype, name, f08):
    """Fortran declaration lines of one dummy argument."""
    if c == "buf":
        return [f"!GCC$ ATTRIBUTES NO_ARG_CHECK :: {name}",
                f"type(*), dimension(*) :: {name}"]
    if c == "ival":
        return [f"{INT_KINDS[ctype]}, intent(in) :: {name}"]
    if c == "lval":
        return [f"logical, intent(in) :: {name}"]
    if c == "dval":
        return [f"double precision, intent(in) :: {name}"]
    if c in ("iptr", "lptr"):
        t = "logical" if c == "lptr" else INT_KINDS[ctype]
        return [f"{t} :: {name}"]  # scalar or array: set below
    if c in ("hin", "hout", "harr", "harr_in"):
        t = f"type({ctype})" if f08 else "integer"
        intent = ", intent(in)" if c in ("hin", "harr_in") else ""
        dim = "(*)" if c.startswith("harr") else ""
        return [f"{t}{intent} :: {name}{dim}"]
    if c in ("status", "statuses"):
        if f08:
            return [f"type(MPI_Status) :: {name}" + ("(*)" if c == "statuses" else "")]
        return [f"integer :: {name}(*)"]
    if c in ("sin", "sout"):
        intent = ", intent(in)" if c == "sin" else ""
        return [f"character(len=*){intent} :: {name}"]
    raise AssertionError(c)


def f_interface(fname, ret, cls, f08, specific):
    args = [n for _, _, n, _ in cls]
    choice = any(c == "buf" for c, _, _, _ in cls)
    lines = []
    if ret == "double":
        lines.append(f"function {specific}({', '.join(args)})")
    else:
        lines.append(f"subroutine {specific}({', '.join(args + ['ierror'])})")
    if f08:
        lines.append("  import")
    lines.append("  implicit none")
    if ret == "double":
        lines.append(f"  double precision :: {specific}")
    for c, ctype, name, extra in cls:
        if not f08 and ((c == "iptr" and extra == "array") or c.startswith("harr") or
                        c == "statuses" or (choice and c in ("ival", "iptr", "hin", "hout"))):
            # `mpi` module: arrays a call ignores in some cases (e.g. with MPI_IN_PLACE) are
            # often passed as scalars; like the buffers, they take any rank. So do the integer
            # arguments of calls with a choice buffer, which MPICH's module leaves without an
            # interface (programs pass a one-element array for a count). Not in mpi_f08: the
            # argument kinds tell the large-count forms apart.
            lines.append(f"  !GCC$ ATTRIBUTES NO_ARG_CHECK :: {name}")
        for d in f_decl(c, ctype, name, f08):
            if c in ("iptr", "lptr") and extra == "array":
                d += "(*)"
            lines.append("  " + d)
    if ret != "double":
        lines.append("  integer, optional :: ierror" if f08 else "  integer :: ierror")
    lines.append(f"end {'function' if ret == 'double' else 'subroutine'} {specific}")
    return lines


def wrap_f90(line, indent="  "):
    """Free-form continuation for long lines."""
    if len(line) <= 100 or line.lstrip().startswith("!"):
        return [line]
    out = []
    while len(line) > 100:
        cut = line.rfind(",", 0, 98) + 1
        if cut <= 0:
            break
        out.append(line[:cut] + " &")
        line = indent + "    " + line[cut:].lstrip()
    out.append(line)
    return out


DEFINE = re.compile(r"^#define\s+(MPIX?_[A-Z0-9_]+)\s+(.*?)\s*(/\*.*)?$")


def read_constants(include):
    """(name, kind, value) with kind 'int' or a handle C type, in header order."""
    raw = []
    for hdr in ("mpi.h", "mpi-ext.h"):
        for line in open(os.path.join(include, hdr)):
            m = DEFINE.match(line.strip())
            if m:
                raw.append((m.group(1), m.group(2)))
    known = {}
    out = []
    for name, val in raw:
        if name.startswith(("MPI_T_", "MPI_F_")) or name in ("MPI_H",):
            continue
        kind = None
        m = re.match(r"^\(\((MPI_[A-Za-z]+)\)\s*(0x[0-9a-fA-F]+|\d+)\)$", val)
        if m and m.group(1) in HANDLE_KINDS:
            kind, v = m.group(1), int(m.group(2), 0)
        elif re.match(r"^\(?-?(0x[0-9a-fA-F]+|\d+)\)?$", val):
            kind, v = "int", int(val.strip("()"), 0)
        elif val in known:
            kind, v = known[val]
        if kind is None or not (-2**31 <= v < 2**31):
            continue
        known[name] = (kind, v)
        out.append((name, kind, v))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--include", required=True)
    ap.add_argument("--exports", required=True)
    ap.add_argument("--bindings", default=os.path.join(os.path.dirname(__file__), "bindings.txt"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--report", action="store_true", help="print functions without bindings")
    a = ap.parse_args()
    ann = read_annotations(a.bindings)
    protos = read_prototypes(a.include)
    exports = {l.split()[-1] for l in open(a.exports) if l.strip()}
    os.makedirs(a.out, exist_ok=True)

    bound, missing = [], []
    for fname in sorted(protos):
        ret, argtext = protos[fname]
        if fname in ann["skip"] or fname in ann["custom"]:
            continue
        if re.search(r"_(c2f|f2c|toint|fromint|c2f08|f082c|f082f|f2f08)$", fname) or \
                fname.startswith(("MPI_T_", "MPI_Abi_")):
            continue
        if fname not in exports:
            missing.append((fname, "not exported by the library yet"))
            continue
        args = [] if argtext.strip() == "void" else [parse_arg(x) for x in argtext.split(",")]
        if any(x is None for x in args):
            missing.append((fname, "unparsed prototype"))
            continue
        try:
            cls = classify(fname, args, ann)
        except Unsupported as e:
            missing.append((fname, str(e)))
            continue
        bound.append((fname, ret, cls))
    func_names = {f.lower() for f, _, _ in bound} | {f.lower() for f in ann["custom"]}

    # C glue
    with open(os.path.join(a.out, "mpi_fortran_gen.c"), "w") as f:
        f.write("/* Generated by fortran/gen.py from include/mpi.h, include/mpi-ext.h and "
                "fortran/bindings.txt. Do not edit. */\n#include \"glue.h\"\n\n")
        for fname, ret, cls in bound:
            f.write(c_glue(fname, ret, cls, ann) + "\n")

    consts = [c for c in read_constants(a.include) if c[0].lower() not in func_names]

    # mpif.h: fixed form compatible (columns 7-72, no continuation), also valid free form.
    fixed = ["! Steadfast mpif.h (generated by fortran/gen.py): fixed or free form"]
    def fdecl(t, n, v):
        fixed.append(f"      {t} {n}")
        fixed.append(f"      PARAMETER ({n}={v})")
    fdecl("INTEGER", "MPI_STATUS_SIZE", 8)
    fdecl("INTEGER", "MPI_SOURCE", 1)
    fdecl("INTEGER", "MPI_TAG", 2)
    fdecl("INTEGER", "MPI_ERROR", 3)
    fdecl("INTEGER", "MPI_ADDRESS_KIND", 8)
    fdecl("INTEGER", "MPI_OFFSET_KIND", 8)
    fdecl("INTEGER", "MPI_COUNT_KIND", 8)
    fdecl("INTEGER", "MPI_INTEGER_KIND", 4)
    for n, k, v in consts:
        fdecl("INTEGER", n, v)
    fixed += sentinel_lines(False)
    for cb in CALLBACKS:
        fixed.append(f"      EXTERNAL {cb}")
    for fname, ret, _ in bound:
        if ret == "double":
            fixed.append(f"      DOUBLE PRECISION {fname.upper()}, P{fname.upper()}")
            fixed.append(f"      EXTERNAL {fname.upper()}, P{fname.upper()}")
    for line in fixed:
        assert len(line) <= 72, line
    open(os.path.join(a.out, "mpif.h"), "w").write("\n".join(fixed) + "\n")

    # module mpi
    c = ["! Generated by fortran/gen.py. Do not edit.",
         "integer, parameter :: MPI_STATUS_SIZE = 8, MPI_SOURCE = 1, MPI_TAG = 2, MPI_ERROR = 3",
         "integer, parameter :: MPI_ADDRESS_KIND = 8, MPI_OFFSET_KIND = 8, MPI_COUNT_KIND = 8",
         "integer, parameter :: MPI_INTEGER_KIND = 4"]
    for n, k, v in consts:
        c.append(f"integer, parameter :: {n} = {v}")
    c += [l.strip() for l in sentinel_lines(False) if not l.startswith("!")]
    open(os.path.join(a.out, "mpi_consts.f90"), "w").write("\n".join(c) + "\n")
    i = ["! Generated by fortran/gen.py. Do not edit.", "interface"]
    for fname, ret, cls in bound:
        for l in f_interface(fname, ret, cls, False, fname.upper()):
            i += wrap_f90("  " + l)
        i.append(f"  ! P{fname.upper()}")
        for l in f_interface(fname, ret, cls, False, "P" + fname.upper()):
            i += wrap_f90("  " + l)
    i.append("end interface")
    open(os.path.join(a.out, "mpi_ifaces.f90"), "w").write("\n".join(i) + "\n")

    # module mpi_f08
    c = ["! Generated by fortran/gen.py. Do not edit."]
    for n, k, v in consts:
        if k == "int":
            c.append(f"integer, parameter :: {n} = {v}")
        else:
            c.append(f"type({k}), parameter :: {n} = {k}({v})")
    open(os.path.join(a.out, "mpi_f08_consts.f90"), "w").write("\n".join(c) + "\n")
    generic = {}
    for fname, ret, cls in bound:
        base = fname[:-2] if fname.endswith("_c") and fname[:-2] in protos else fname
        members = generic.setdefault(base, [])
        sig = [f_decl(c, t, "x", True) + [e == "array"] for c, t, _, e in cls]
        # A _c form whose Fortran arguments look the same (MPI_Aint and MPI_Count are both
        # INTEGER(KIND=8)) would make the generic ambiguous; the standard omits it too.
        if any(sig == [f_decl(c, t, "x", True) + [e == "array"] for c, t, _, e in m[2]]
               for m in members):
            continue
        members.append((fname, ret, cls))
    i = ["! Generated by fortran/gen.py. Do not edit."]
    for pfx in ("", "P"):
        for base, members in generic.items():
            i.append(f"interface {pfx}{base}")
            for fname, ret, cls in members:
                for l in f_interface(fname, ret, cls, True, f"{pfx}{fname}_f08"):
                    i += wrap_f90("  " + l)
            i.append(f"end interface {pfx}{base}")
    open(os.path.join(a.out, "mpi_f08_ifaces.f90"), "w").write("\n".join(i) + "\n")

    # mpi_f08 handle types and their comparison operators
    kinds = sorted(HANDLE_KINDS)
    t = ["! Generated by fortran/gen.py. Do not edit."]
    for k in kinds:
        t += [f"type, bind(C) :: {k}", "  integer :: MPI_VAL", f"end type {k}"]
    t.append("interface operator(==)")
    t += [f"  module procedure steadfast_eq_{k[4:].lower()}" for k in kinds]
    t.append("end interface")
    t.append("interface operator(/=)")
    t += [f"  module procedure steadfast_ne_{k[4:].lower()}" for k in kinds]
    t.append("end interface")
    for k in kinds:
        t.append(f"private :: steadfast_eq_{k[4:].lower()}, steadfast_ne_{k[4:].lower()}")
    open(os.path.join(a.out, "mpi_f08_types.f90"), "w").write("\n".join(t) + "\n")
    t = ["! Generated by fortran/gen.py. Do not edit."]
    for k in kinds:
        n = k[4:].lower()
        for op, rel in (("eq", "=="), ("ne", "/=")):
            t += [f"elemental logical function steadfast_{op}_{n}(a, b)",
                  f"  type({k}), intent(in) :: a, b",
                  f"  steadfast_{op}_{n} = a%MPI_VAL {rel} b%MPI_VAL",
                  f"end function steadfast_{op}_{n}"]
    open(os.path.join(a.out, "mpi_f08_ops.f90"), "w").write("\n".join(t) + "\n")
    # MPI_SIZEOF: one specific per intrinsic type and kind, any rank.
    for mod in ("mpi", "mpi_f08"):
        iface, impl = [f"interface MPI_Sizeof"], []
        for t, kinds in (("integer", (1, 2, 4, 8, 16)), ("real", (4, 8, 10, 16)),
                         ("complex", (4, 8, 10, 16)), ("logical", (1, 2, 4, 8))):
            for k in kinds:
                n = f"{mod}_sizeof_{t}{k}"
                iface.append(f"  module procedure {n}")
                impl += [f"subroutine {n}(x, size, ierror)",
                         f"  {t}(kind={k}), dimension(..), intent(in) :: x",
                         "  integer, intent(out) :: size",
                         "  integer, optional, intent(out) :: ierror",
                         "  size = int(storage_size(x) / 8)",
                         "  if (present(ierror)) ierror = 0",
                         f"end subroutine {n}"]
        n = f"{mod}_sizeof_character"
        iface.append(f"  module procedure {n}")
        impl += [f"subroutine {n}(x, size, ierror)",
                 "  character(len=*), dimension(..), intent(in) :: x",
                 "  integer, intent(out) :: size",
                 "  integer, optional, intent(out) :: ierror",
                 "  size = int(storage_size(x) / 8 / max(len(x), 1))",
                 "  if (present(ierror)) ierror = 0",
                 f"end subroutine {n}"]
        iface.append("end interface MPI_Sizeof")
        open(os.path.join(a.out, f"{mod}_sizeof_iface.f90"), "w").write("\n".join(iface) + "\n")
        open(os.path.join(a.out, f"{mod}_sizeof_impl.f90"), "w").write("\n".join(impl) + "\n")

    with open(os.path.join(a.out, "report.txt"), "w") as f:
        f.write(f"{len(bound)} generated bindings, {len(ann['custom'])} written by hand\n")
        for fname, why in missing:
            f.write(f"no binding: {fname}: {why}\n")
    if a.report:
        sys.stdout.write(open(os.path.join(a.out, "report.txt")).read())
    print(f"gen.py: {len(bound)} generated bindings, {len(missing)} functions without "
          f"(see {os.path.join(a.out, 'report.txt')})")


def sentinel_lines(f08):
    """Sentinel variables, in common blocks the C glue defines and compares addresses with."""
    out = []
    for name, typ, dims, block in SENTINELS:
        out.append(f"      {typ} {name}{dims}")
        out.append(f"      COMMON /{block}/ {name}")
    return out


# Predefined callbacks, defined in glue.c.
CALLBACKS = ["MPI_COMM_NULL_COPY_FN", "MPI_COMM_DUP_FN", "MPI_COMM_NULL_DELETE_FN",
             "MPI_TYPE_NULL_COPY_FN", "MPI_TYPE_DUP_FN", "MPI_TYPE_NULL_DELETE_FN",
             "MPI_NULL_COPY_FN", "MPI_DUP_FN", "MPI_NULL_DELETE_FN"]

SENTINELS = [
    ("MPI_BOTTOM", "INTEGER", "", "mpi_fortran_bottom"),
    ("MPI_IN_PLACE", "INTEGER", "", "mpi_fortran_in_place"),
    ("MPI_BUFFER_AUTOMATIC", "INTEGER", "", "mpi_fortran_buffer_automatic"),
    ("MPI_STATUS_IGNORE", "INTEGER", "(MPI_STATUS_SIZE)", "mpi_fortran_status_ignore"),
    ("MPI_STATUSES_IGNORE", "INTEGER", "(MPI_STATUS_SIZE,1)", "mpi_fortran_statuses_ignore"),
    ("MPI_ERRCODES_IGNORE", "INTEGER", "(1)", "mpi_fortran_errcodes_ignore"),
    ("MPI_UNWEIGHTED", "INTEGER", "(1)", "mpi_fortran_unweighted"),
    ("MPI_WEIGHTS_EMPTY", "INTEGER", "(1)", "mpi_fortran_weights_empty"),
    ("MPI_ARGV_NULL", "CHARACTER*1", "(1)", "mpi_fortran_argv_null"),
    ("MPI_ARGVS_NULL", "CHARACTER*1", "(1,1)", "mpi_fortran_argvs_null"),
]

if __name__ == "__main__":
    main()
