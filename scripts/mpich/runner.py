#!/usr/bin/env python3
"""Build and run MPICH's test/mpi suite against an MPI library, graded by MPICH's own rules.

Called by scripts/mpich-tests.sh (which fetches the sources); see docs/conformance.md.
Python standard library only.

Pipeline:
  1. probe the MPI compiler wrapper (header constants, link probes) and write
     include/mpitestconf.h the way MPICH's configure would, but from what the library under
     test actually provides (e.g. HAVE_MPI_WIN_CREATE only if the RMA calls used by mtest.c link);
  2. build util/ (mtest, dtypes) and dtpools/ into static archives;
  3. build each program named in the selected testlists, with per-program sources and flags
     taken from the directory's Makefile.am;
  4. run each testlist entry with `MPIEXEC -n NP [mpiexecargs] ./prog [args]` under a timeout,
     grade it with runtests' rules, print a table per directory and write JSON + Markdown.
"""

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

DEFAULT_DIRS = "basic init pt2pt coll comm group datatype errhan attr topo info io"
MPICH_DEFAULT_TIME_LIMIT = 180  # runtests' $defaultTimeLimit
STATUSES = ("pass", "fail", "timeout", "skip", "build-failed")

# ---------------------------------------------------------------------------------------------
# Scope: identifiers whose absence makes a test out of scope rather than a failure.
# A test whose build fails only because of identifiers in these groups is reported as skipped
# with the group as its reason; any other missing identifier makes it a build failure.

RMA_MODE = r"MPI_MODE_(NOCHECK|NOSTORE|NOPUT|NOPRECEDE|NOSUCCEED)"
OUT_OF_SCOPE = [
    ("one-sided RMA", re.compile(
        r"^P?MPI_(Win_\w+|Win|Put|Get|Accumulate|Get_accumulate|Fetch_and_op|Compare_and_swap"
        r"|Rput|Rget|Raccumulate|Rget_accumulate)(_c)?$|^MPI_(WIN_\w+|LOCK_\w+)$|^" + RMA_MODE
        + r"$")),
    ("MPI-IO", re.compile(
        r"^P?MPI_(File_\w+|File|Register_datarep(_c)?|Datarep_\w+)$"
        r"|^MPI_(FILE_NULL|SEEK_\w+|DISPLACEMENT_CURRENT|MODE_\w+|MAX_DATAREP_STRING)$"
        r"|^MPIO_\w+$")),
    ("dynamic processes", re.compile(
        r"^P?MPI_(Comm_spawn(_multiple)?|Comm_get_parent|Open_port|Close_port|Comm_accept"
        r"|Comm_connect|Comm_disconnect|Comm_join|Publish_name|Unpublish_name|Lookup_name)$"
        r"|^MPI_(ARGV_NULL|ARGVS_NULL|ERRCODES_IGNORE|MAX_PORT_NAME)$")),
    ("MPI Sessions", re.compile(
        r"^P?MPI_(Session_\w+|Session|Group_from_session_pset)$"
        r"|^MPI_(SESSION_NULL|MAX_PSET_NAME_LEN)$")),
    ("Fortran", re.compile(
        r"^P?MPI_(\w+_f2c|\w+_c2f|\w+_f082c|\w+_c2f08|\w+_f2f08|\w+_f082f|Type_create_f90_\w+)$"
        r"|^MPI_(Fint|F08_status|F_STATUSE?S?_IGNORE|F08_STATUSE?S?_IGNORE|F_\w+)$"
        r"|^MPI_(INTEGER\d*|REAL\d*|DOUBLE_PRECISION|COMPLEX\d*|DOUBLE_COMPLEX|LOGICAL\d*"
        r"|CHARACTER|2REAL|2INTEGER|2DOUBLE_PRECISION|2COMPLEX|2DOUBLE_COMPLEX)$")),
    ("removed in MPI-3.0", re.compile(
        r"^P?MPI_(Type_extent|Type_lb|Type_ub|Type_hvector|Type_hindexed|Type_struct|Address"
        r"|Errhandler_create|Errhandler_set|Errhandler_get)$"
        r"|^MPI_(LB|UB|Handler_function|COMBINER_HVECTOR_INTEGER|COMBINER_HINDEXED_INTEGER"
        r"|COMBINER_STRUCT_INTEGER)$")),
    ("MPICH extensions", re.compile(
        r"^P?MPIX_(?!(Comm_(revoke|is_revoked|shrink|ishrink|agree|iagree|failure_ack"
        r"|failure_get_acked|get_failed|ack_failed)|ERR_PROC_FAILED|ERR_PROC_FAILED_PENDING"
        r"|ERR_REVOKED)$)\w+$")),
]


def scope_of(ident):
    """Returns the out-of-scope group an identifier belongs to, or None if it is in scope."""
    for name, rx in OUT_OF_SCOPE:
        if rx.match(ident):
            return name
    return None


# ---------------------------------------------------------------------------------------------
# Small helpers

def log(msg=""):
    print(msg, flush=True)


def run_capture(cmd, cwd=None, timeout=600, env=None):
    """Runs cmd (list) and returns (exit status, combined output)."""
    if env is None:
        env = dict(os.environ, LC_ALL="C")  # compiler messages in a parseable form
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, env=env)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        return 124, out + "\n[timed out after %ss]" % timeout
    except OSError as e:
        return 127, str(e)


def write_if_changed(path, text):
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old != text:
        with open(path, "w") as f:
            f.write(text)


def parse_kv_tokens(tokens):
    """Parses testlist key=value tokens into a dict of lists (runtests' accepted keys)."""
    opt = {"args": [], "envs": [], "mpiexecargs": []}
    for tok in tokens:
        m = re.match(r"([^=]+)=(.*)", tok)
        if not m:
            continue  # runtests ignores bare words (e.g. pt2pt's "test/mpi/pt2pt/sendself")
        key, value = m.group(1), m.group(2)
        if key == "arg":
            opt["args"].append(value)
        elif key == "env":
            opt["envs"].append(value)
        elif key == "mpiexecarg":
            opt["mpiexecargs"].append(value)
        elif key == "skip":
            # Ours (basic.testlist only): listed but not run, with the reason given.
            opt["skip_reason"] = {"benchmark": "benchmark program, not a conformance test "
                                  "(NetPIPE-style timing loops)"}.get(value, value)
        else:
            opt[key] = value
    return opt


# ---------------------------------------------------------------------------------------------
# Testlists

def testlist_text(srcdir, d):
    """Returns the testlist of directory d with configure's @substitutions@ applied."""
    if d == "basic":
        path = os.path.join(HERE, "basic.testlist")
    else:
        path = os.path.join(srcdir, d, "testlist")
        if not os.path.exists(path):
            path = os.path.join(srcdir, d, "testlist.in")
    with open(path) as f:
        text = f.read()
    # Values a configure run would substitute: large-memory tests off (as MPICH's default),
    # MPIX-marked lines kept (strictness is handled by the strict= annotation), every optional
    # sub-directory (rma, spawn, io, Fortran, ...) commented out.
    # comm_overlap: the threads/ tests of collectives and communicator creation overlapping
    # in several threads, which MPICH enables by default.
    subst = {"largetest": "#", "mpix": "", "comm_overlap": ""}
    return re.sub(r"@(\w+)@", lambda m: subst.get(m.group(1), "#"), text)


def parse_testlist(srcdir, d):
    entries = []
    for lineno, line in enumerate(testlist_text(srcdir, d).splitlines(), 1):
        line = re.sub(r"#.*", "", line).strip()
        if not line:
            continue
        tokens = line.split()
        if tokens[0].startswith("!"):
            continue  # "!dir:target" build hooks; none in the supported directories
        name = tokens[0]
        np_ = 1
        if len(tokens) > 1 and re.match(r"^\d+$", tokens[1]):
            np_ = int(tokens[1])
        opt = parse_kv_tokens(tokens[2:])
        e = {"dir": d, "name": name, "np": np_, "line": lineno, **opt}
        e["id"] = test_id(e)
        entries.append(e)
    return entries


FORTRAN_DIRS = ("f77", "f90", "f08")


def fortran_names(mpifort):
    """Lower-case MPI names a Fortran program can use with this wrapper: what mpif.h
    declares and what the Fortran library exports. Empty if the wrapper does not say."""
    rc, out = run_capture(mpifort + ["-show"])
    if rc != 0:
        return set()
    words = shlex.split(out)
    names = set()
    for w in words:
        if w.startswith("-I") and os.path.exists(os.path.join(w[2:], "mpif.h")):
            with open(os.path.join(w[2:], "mpif.h")) as f:
                names |= {n.lower() for n in re.findall(r"\b(P?MPIX?_\w+)", f.read(), re.I)}
        if w.startswith("-L") and os.path.isdir(w[2:]):
            for lib in os.listdir(w[2:]):
                if re.match(r"lib\w*f(ort|77|90)\w*\.so$", lib):
                    rc, syms = run_capture(["nm", "-D", "--defined-only",
                                            os.path.join(w[2:], lib)])
                    names |= {m.lower() for m in re.findall(r"\s[TtWi]\s+(p?mpix?_\w+?)(?:_f08)?_\b",
                                                            syms)}
    return names


def fortran_out_of_scope(sources, known):
    """Reason to skip a Fortran test that names an out-of-scope MPI identifier the bindings
    lack (with mpif.h an unknown constant is an implicitly typed variable and would only fail
    at run time), or None."""
    if not known:
        return None
    groups = {}
    for src in sources:
        if not src.endswith((".f", ".f90")) or not os.path.exists(src):
            continue
        with open(src, errors="replace") as f:
            text = "\n".join(l for l in f.read().splitlines()
                             if not re.match(r"^([cC*]|\s*!)", l))
        for ident in set(re.findall(r"\b(p?mpix?_\w+)", text, re.I)):
            low = ident.lower()
            if low in known:
                continue
            for cand in (canonical_ident(low + "_"), canonical_ident(low)):
                g = scope_of(cand)
                if g:
                    groups.setdefault(g, set()).add(cand)
                    break
    if not groups:
        return None
    return "out of scope (" + "; ".join("%s: %s" % (g, ", ".join(sorted(ids)[:4]))
                                        for g, ids in groups.items()) + ")"


def fortran_kind(d):
    """'f77', 'f90' or 'f08' for a directory of MPICH's Fortran tests, else None."""
    top = d.split("/", 1)[0]
    return top if top in FORTRAN_DIRS else None


def expand_dirs(srcdir, dirs):
    """A language directory (f77, f90, f08, cxx) stands for the sub-directories its testlist
    lists (those a configure run would enable: rma, io and spawn are commented out)."""
    out = []
    for d in dirs:
        if d in FORTRAN_DIRS + ("cxx",) and "/" not in d:
            for line in testlist_text(srcdir, d).splitlines():
                line = re.sub(r"#.*", "", line).strip()
                if line and os.path.isdir(os.path.join(srcdir, d, line.split()[0])):
                    out.append("%s/%s" % (d, line.split()[0]))
        else:
            out.append(d)
    return out


def test_id(e):
    parts = ["%s/%s" % (e["dir"], e["name"]), str(e["np"])]
    parts += e["args"]
    parts += ["env:" + v for v in e["envs"]]
    return " ".join(parts)


def load_fast_list():
    sel = []
    with open(os.path.join(HERE, "fast.list")) as f:
        for line in f:
            line = re.sub(r"#.*", "", line).strip()
            if line:
                tokens = line.split()
                sel.append((tokens[0], int(tokens[1]), tokens[2:]))
    return sel


def select_fast(entries, fast):
    """Keeps the entries named in fast.list ("dir/name np [args]"), in testlist order."""
    keep = []
    for e in entries:
        for (path, np_, args) in fast:
            if path == "%s/%s" % (e["dir"], e["name"]) and np_ == e["np"] \
                    and args == e["args"] and not e["envs"]:
                keep.append(e)
                break
    return keep


# ---------------------------------------------------------------------------------------------
# Makefile.am: per-program sources and flags

def parse_makefile_am(path):
    """Returns {variable: value} from an automake file (continuations joined, += appended,
    conditionals flattened: the supported directories only use them to add programs)."""
    vars_ = {}
    if not os.path.exists(path):
        return vars_
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        m = re.match(r"^([A-Za-z0-9_]+)\s*(\+?=)\s*(.*)$", line)
        if not m:
            continue
        name, op, value = m.groups()
        if op == "+=" and name in vars_:
            vars_[name] += " " + value
        else:
            vars_[name] = value
    return vars_


def program_recipe(srcdir, d, prog, am):
    """Sources, preprocessor flags and extra link inputs of one test program."""
    canon = re.sub(r"[^A-Za-z0-9_]", "_", prog)
    kind = fortran_kind(d)
    default = prog + {"f77": ".f", "f90": ".f90", "f08": ".f90"}.get(kind, ".c")
    if d.startswith("cxx"):
        default = prog + ".cxx"
    sources = am.get(canon + "_SOURCES", am.get("nodist_" + canon + "_SOURCES", default)).split()
    sources = [s for s in sources if s.endswith((".c", ".f", ".f90", ".cxx"))]
    cpp = am.get(canon + "_CPPFLAGS", "").replace("$(AM_CPPFLAGS)", "").split()
    ldadd = am.get(canon + "_LDADD", "")
    extra = []
    if "LDADDDATA" in ldadd or "libdtypes" in ldadd:
        extra.append("@dtypes")
    extra += [t for t in ldadd.split() if t.startswith("-l")]
    paths = []
    for s in sources:
        p = os.path.join(srcdir, d, s)
        if kind and not os.path.exists(p) and "/" in d:
            # BUILT_SOURCES: Makefile.am copies these from the f90 or f77 twin directory.
            for twin in ("f90", "f77"):
                q = os.path.join(srcdir, twin, d.split("/", 1)[1], s)
                if os.path.exists(q):
                    p = q
                    break
        paths.append(p)
    return {"sources": paths, "cppflags": cpp, "extra": extra}


# ---------------------------------------------------------------------------------------------
# Configuration: probe the compiler wrapper and write mpitestconf.h

class Toolchain:
    def __init__(self, mpicc, builddir, jobs):
        self.mpicc = mpicc
        self.builddir = builddir
        self.jobs = jobs
        self.cflags = ["-O2", "-ffunction-sections", "-fdata-sections"]
        # Unused utility functions (mtest.c has helpers for every object kind) must not make
        # a test unlinkable against a library that lacks what they call.
        self.ldflags = ["-Wl,--gc-sections"]

    def compile_link(self, src_text, extra=(), run=False, name="probe"):
        """Compiles (and links) a probe program; returns (ok, output, run output)."""
        pdir = os.path.join(self.builddir, "probes")
        os.makedirs(pdir, exist_ok=True)
        c = os.path.join(pdir, name + ".c")
        exe = os.path.join(pdir, name)
        with open(c, "w") as f:
            f.write(src_text)
        rc, out = run_capture(self.mpicc + self.cflags + ["-o", exe, c] + list(extra)
                              + self.ldflags + ["-lm"])
        if rc != 0:
            return False, out, ""
        if run:
            rc2, out2 = run_capture([exe], timeout=30)
            return rc2 == 0, out, out2
        return True, out, ""


def probe_config(tc, srcdir, incdir):
    """Returns (defines dict, facts dict)."""
    defs = {}
    facts = {}

    def have(name, text, **kw):
        ok, out, runout = tc.compile_link(text, name=name.lower(), **kw)
        facts[name] = ok
        if ok:
            defs[name] = "1"
        return ok, runout

    # C environment, as configure would find it.
    for h in ["stdarg.h", "stdint.h", "inttypes.h", "stdlib.h", "string.h", "strings.h",
              "memory.h", "unistd.h", "sys/time.h", "sys/types.h", "sys/stat.h",
              "sys/resource.h", "pthread.h", "dlfcn.h"]:
        have("HAVE_" + re.sub(r"[^A-Z0-9]", "_", h.upper()),
             "#include <%s>\nint main(void){return 0;}\n" % h)
    defs["STDC_HEADERS"] = "1"
    have("HAVE_LONG_DOUBLE", "int main(void){long double x=1; return (int)(x-1);}\n")
    have("HAVE_LONG_LONG", "int main(void){long long x=1; return (int)(x-1);}\n")
    have("HAVE__BOOL", "int main(void){_Bool b=0; return b;}\n")
    have("HAVE_FLOAT__COMPLEX", "int main(void){float _Complex x=0; return (int)__real__ x;}\n")
    have("HAVE_DOUBLE__COMPLEX", "int main(void){double _Complex x=0; return (int)__real__ x;}\n")
    have("HAVE_LONG_DOUBLE__COMPLEX",
         "int main(void){long double _Complex x=0; return (int)__real__ x;}\n")
    if facts.get("HAVE_LONG_DOUBLE") and facts.get("HAVE_LONG_DOUBLE__COMPLEX"):
        defs["USE_LONG_DOUBLE_COMPLEX"] = "1"
    have("HAVE_USLEEP", "#include <unistd.h>\nint main(void){usleep(1); return 0;}\n")
    have("HAVE_STRDUP", "#include <string.h>\nint main(void){return strdup(\"x\")==0;}\n")
    have("HAVE_GETRUSAGE", "#include <sys/resource.h>\nint main(void){struct rusage r;"
         " return getrusage(RUSAGE_SELF,&r);}\n")
    have("HAVE_H_ADDR_LIST", "#include <netdb.h>\nint main(void){struct hostent h;"
         " return h.h_addr_list==0;}\n")
    ok, out = have("SIZES", "#include <stdio.h>\n#include <mpi.h>\nint main(void){"
                   "printf(\"%d %d %d %d %d %d\\n\",(int)sizeof(short),(int)sizeof(int),"
                   "(int)sizeof(long),(int)sizeof(long long),(int)sizeof(void*),"
                   "(int)sizeof(MPI_Offset));return 0;}\n", run=True)
    defs.pop("SIZES", None)
    if ok:
        s = out.split()
        for key, val in zip(["SIZEOF_SHORT", "SIZEOF_INT", "SIZEOF_LONG", "SIZEOF_LONG_LONG",
                             "SIZEOF_VOID_P", "SIZEOF_MPI_OFFSET"], s):
            defs[key] = val
        defs["POINTERINT_t"] = "long" if s[4] == s[2] else "long long"
    defs["THREAD_PACKAGE_NAME"] = "THREAD_PACKAGE_POSIX"
    defs["PACKAGE"] = '"mpich-testsuite"'
    defs["PACKAGE_NAME"] = '"mpich-testsuite"'

    # MPI version from the header.
    hdr = os.path.join(tc.builddir, "probes", "version.c")
    with open(hdr, "w") as f:
        f.write("#include <mpi.h>\n")
    rc, out = run_capture(tc.mpicc + ["-E", "-dM", hdr])
    mv = re.search(r"#define MPI_VERSION\s+(\d+)", out)
    ms = re.search(r"#define MPI_SUBVERSION\s+(\d+)", out)
    facts["mpi_version"] = "%s.%s" % (mv.group(1) if mv else "?", ms.group(1) if ms else "?")
    facts["is_mpich"] = bool(re.search(r"#define MPICH\b", out))
    facts["has_mpi_ext_h"] = tc.compile_link(
        "#include <mpi.h>\n#include <mpi-ext.h>\nint main(void){return 0;}\n",
        name="mpi_ext")[0]

    # mtest.c includes mpitestconf.h: the probe below needs what is known so far.
    write_conf_header(os.path.join(incdir, "mpitestconf.h"), defs, False)

    # MPI features that select code in the utility library and the tests.  mtest.c's window
    # helpers are compiled in only if they link, so a library without RMA can run the rest.
    mt = os.path.join(srcdir, "util", "mtest.c")
    ok, _, _ = tc.compile_link(
        "#include <mpi.h>\nint MTestGetWin(MPI_Win*,int); void MTestFreeWin(MPI_Win*);\n"
        "const char *MTestGetWinName(void);\n"
        "int main(int c,char**v){MPI_Win w; MPI_Init(&c,&v); if(MTestGetWin(&w,0))"
        "{MTestGetWinName(); MTestFreeWin(&w);} MPI_Finalize(); return 0;}\n",
        extra=["-DHAVE_MPI_WIN_CREATE", "-I" + incdir, "-I" + os.path.join(srcdir, "include"),
               mt, os.path.join(srcdir, "util", "mtest_common.c")],
        name="mpi_win")
    facts["HAVE_MPI_WIN_CREATE"] = ok
    if ok:
        defs["HAVE_MPI_WIN_CREATE"] = "1"
    have("HAVE_MPI_IO", "#include <mpi.h>\nint main(int c,char**v){MPI_File f; MPI_Init(&c,&v);"
         "MPI_File_open(MPI_COMM_SELF,\"x\",MPI_MODE_RDONLY,MPI_INFO_NULL,&f);"
         "MPI_File_close(&f); MPI_Finalize(); return 0;}\n")
    have("HAVE_MPI_SPAWN", "#include <mpi.h>\nint main(int c,char**v){MPI_Comm ic;"
         "MPI_Init(&c,&v); MPI_Comm_spawn(\"x\",MPI_ARGV_NULL,1,MPI_INFO_NULL,0,MPI_COMM_SELF,"
         "&ic,MPI_ERRCODES_IGNORE); MPI_Finalize(); return 0;}\n")
    have("HAVE_MPI_INTEGER16", "#include <mpi.h>\nint main(void){MPI_Datatype t=MPI_INTEGER16;"
         " return t==MPI_DATATYPE_NULL;}\n")

    # MPI 4.1 adopted MPICH's MPIX_Delete_error_{class,code,string} as MPI_Remove_error_*;
    # MPICH 4.0's tests call the MPIX names (include/mtest_mpix.h).  Where mpi.h declares the
    # standard names, map the old ones onto them so these tests measure the standard calls.
    ok, _, _ = tc.compile_link(
        "#include <mpi.h>\nint main(void){return MPI_Remove_error_class(0)+"
        "MPI_Remove_error_code(0)+MPI_Remove_error_string(0);}\n",
        extra=["-c", "-Werror=implicit-function-declaration"], name="remove_error")
    facts["maps_mpix_delete_error"] = ok and not facts["is_mpich"]
    if facts["maps_mpix_delete_error"]:
        for what in ("class", "code", "string"):
            defs["MPIX_Delete_error_" + what] = "MPI_Remove_error_" + what
    return defs, facts


def write_conf_header(path, defs, strict):
    lines = ["/* Generated by scripts/mpich/runner.py from probes of the MPI compiler wrapper;",
             "   stands in for the header MPICH's test configure would write. */",
             "#ifndef MPITESTCONF_H_INCLUDED", "#define MPITESTCONF_H_INCLUDED"]
    for k in sorted(defs):
        lines.append("#define %s %s" % (k, defs[k]))
    if strict:
        lines.append("#define USE_STRICT_MPI 1")
    lines.append("#endif")
    write_if_changed(path, "\n".join(lines) + "\n")


def write_dtpools_conf(path):
    write_if_changed(path, "#ifndef DTPOOLSCONF_H_INCLUDED\n#define DTPOOLSCONF_H_INCLUDED\n"
                     "#define HAVE_STDLIB_H 1\n#define HAVE_STRING_H 1\n#define HAVE_STDINT_H 1\n"
                     "#define HAVE_UNISTD_H 1\n#define HAVE_MEMSET 1\n#define HAVE_STRDUP 1\n"
                     "#define STDC_HEADERS 1\n#endif\n")


# ---------------------------------------------------------------------------------------------
# Build

Q = "[`'\u2018\u2019]"  # gcc quotes identifiers with ASCII or Unicode quotes
MISSING_PATTERNS = [
    re.compile(r"undefined reference to %s([A-Za-z_]\w*)%s" % (Q, Q)),
    re.compile(r"error: %s([A-Za-z_]\w*)%s undeclared" % (Q, Q)),
    re.compile(r"error: unknown type name %s([A-Za-z_]\w*)%s" % (Q, Q)),
    re.compile(r"implicit declaration of function %s([A-Za-z_]\w*)%s" % (Q, Q)),
    # gfortran: a constant or function the mpi/mpi_f08 module does not have
    re.compile(r"Symbol %s((?:mpi|mpix)_\w+)%s at \(\d+\) has no IMPLICIT type" % (Q, Q)),
]


def canonical_ident(ident):
    """MPI name of a Fortran symbol: `mpi_win_create_` -> MPI_Win_create (a function),
    `mpi_win_null` -> MPI_WIN_NULL (a constant); C identifiers are returned unchanged."""
    m = re.match(r"^(p?)(mpix?|mpio)_(\w+?)(_f08)?(_?)$", ident)
    if not m or ident != ident.lower():
        return ident
    pre, lib, rest, _, underscore = m.groups()
    if underscore:
        return pre.upper() + lib.upper() + "_" + rest[:1].upper() + rest[1:]
    return pre.upper() + lib.upper() + "_" + rest.upper()
# Compile errors of tests that rely on MPICH's integer handles (e.g. `switch` on an
# MPI_Datatype); with the standard ABI's opaque pointer handles such code is not valid C.
NONPORTABLE_HANDLES = re.compile(r"error: (switch quantity not an integer|case label does not "
                                 r"reduce to an integer constant)")
NONPORTABLE_REASON = "test is not portable: it uses MPI handles as integers (switch/case on " \
    "MPI_Datatype), valid only with MPICH's integer handles"
# Warnings of a build that succeeded but stores handles in ints (e.g. `int *sendtypes` passed
# as MPI_Datatype[]): the program truncates pointer handles, so its result says nothing about
# the library.  MPICH's integer handles never trigger these.
HANDLE = r"(MPI_(Datatype|Comm|Group|Op|Request|Info|Errhandler|Win|File|Message|Session)\b[^']*" \
    r"|struct \w+ \*)"
# Defects of MPICH 4.0.2's tests, fixed in a copy that is built instead of the source:
# (directory, source file) -> [(text, replacement, why)]. A fix applies only where its text
# is found, so a newer test without the defect is built as it is.
TEST_DEFECTS = {
    ("ft", "gather.c"): [(
        "recvbuf = (int *) malloc(size * sizeof(int));",
        "recvbuf = (int *) malloc(size * size * sizeof(int));",
        "MPI_Gather receives `size` ints from each rank into a buffer of `size` ints: the "
        "blocks of ranks 2 and 3 land past its end (valgrind: an invalid write 16 bytes "
        "after the 16-byte block), which glibc sometimes reports as a damaged heap at exit",
    )],
}

INT_HANDLE_WARNINGS = [
    re.compile(r"warning: assignment to 'int' from '%s' makes integer from pointer" % HANDLE),
    re.compile(r"note: expected '(const )?%s\*?( const)?\*?' but argument is of type "
               r"'(const )?int \*'" % HANDLE),
]
INT_HANDLE_REASON = "test is not portable: it stores MPI handles in int variables (%s), " \
    "valid only with MPICH's integer handles"


def classify_build_failure(out):
    """Returns (status, reason, missing identifiers) for a failed build."""
    missing = []
    for rx in MISSING_PATTERNS:
        for m in rx.finditer(out):
            ident = canonical_ident(m.group(1))
            if re.match(r"^P?MPIX?_|^MPIO_", ident) and ident not in missing:
                missing.append(ident)
    if missing:
        groups = {}
        in_scope = []
        for ident in missing:
            g = scope_of(ident)
            if g:
                groups.setdefault(g, []).append(ident)
            else:
                in_scope.append(ident)
        if groups:
            # Out of scope as soon as it needs one such feature, whatever else is missing.
            reason = "; ".join("%s: %s" % (g, ", ".join(ids[:4]) + (", ..." if len(ids) > 4
                                                                   else ""))
                               for g, ids in groups.items())
            return "skip", "out of scope (" + reason + ")", missing
        return "build-failed", "missing: " + ", ".join(in_scope), missing
    m = NONPORTABLE_HANDLES.search(out)
    if m:
        return "skip", NONPORTABLE_REASON, missing
    first = next((l.strip() for l in out.splitlines() if "error" in l.lower()),
                 out.strip().splitlines()[-1] if out.strip() else "unknown build error")
    return "build-failed", first[:200], missing


class Builder:
    def __init__(self, tc, srcdir, builddir, facts, stamp, rebuild):
        self.tc = tc
        self.srcdir = srcdir
        self.builddir = builddir
        self.facts = facts
        self.stamp = stamp
        self.rebuild = rebuild
        self.inc = [os.path.join(builddir, "include"), os.path.join(srcdir, "include"),
                    os.path.join(builddir, "dtpools", "include")]

    def incflags(self):
        return ["-I" + p for p in self.inc]

    def build_archive(self, name, sources, extra_inc=(), defines=()):
        odir = os.path.join(self.builddir, "lib", name)
        os.makedirs(odir, exist_ok=True)
        objs = []
        for s in sources:
            o = os.path.join(odir, os.path.basename(s)[:-2] + ".o")
            rc, out = run_capture(self.tc.mpicc + self.tc.cflags + self.incflags()
                                  + ["-I" + p for p in extra_inc] + list(defines)
                                  + ["-c", "-o", o, s])
            if rc != 0:
                log("  warning: %s did not compile: %s" % (os.path.relpath(s, self.srcdir),
                                                           out.strip().splitlines()[-1:]))
                continue
            objs.append(o)
        lib = os.path.join(self.builddir, "lib", "lib%s.a" % name)
        if os.path.exists(lib):
            os.remove(lib)
        if objs:
            run_capture(["ar", "rcs", lib] + objs)
        return lib if objs else None

    def build_support(self):
        u = os.path.join(self.srcdir, "util")
        # dtpools' private header includes "../dtpoolsconf.h" relative to its own directory.
        dinc = os.path.join(self.builddir, "dtpools", "include")
        os.makedirs(dinc, exist_ok=True)
        for h in os.listdir(os.path.join(self.srcdir, "dtpools", "include")):
            if h.endswith(".h"):
                shutil.copy(os.path.join(self.srcdir, "dtpools", "include", h), dinc)
        write_dtpools_conf(os.path.join(self.builddir, "dtpools", "dtpoolsconf.h"))
        self.libmtest = self.build_archive("mtest", [os.path.join(u, f) for f in
                                                     ("mtest_single.c", "mtest.c",
                                                      "mtest_common.c")])
        # threads/: mtest.c with MTEST_USE_THREAD and the POSIX thread layer (MPICH's
        # Makefile_threads.mtest links libmtest_thread instead of mtest_single).
        self.libmtest_thread = self.build_archive(
            "mtest_thread", [os.path.join(u, f) for f in ("mtest_thread.c", "mtest.c", "mtest_common.c")],
            defines=["-DMTEST_USE_THREAD"])
        self.libdtypes = self.build_archive("dtypes", [os.path.join(u, "dtypes.c")])
        dsrc = os.path.join(self.srcdir, "dtpools", "src")
        self.libdtpools = self.build_archive(
            "dtpools", sorted(os.path.join(dsrc, f) for f in os.listdir(dsrc) if f.endswith(".c")))
        if not self.libmtest:
            raise SystemExit("error: the MPICH test utilities (util/mtest.c) do not compile "
                             "with %s; see the warnings above" % " ".join(self.tc.mpicc))

    def fortran_support(self, kind):
        """Archive of MPICH's Fortran test helpers (util/mtest_<kind>), built once."""
        attr = "libmtest_" + kind
        if not hasattr(self, attr):
            src = os.path.join(self.srcdir, "util", "mtest_%s.%s" % (kind, "f" if kind == "f77"
                                                                      else "f90"))
            odir = os.path.join(self.builddir, "lib", "mtest_" + kind)
            os.makedirs(odir, exist_ok=True)
            o = os.path.join(odir, "mtest_%s.o" % kind)
            lib = os.path.join(self.builddir, "lib", "libmtest_%s.a" % kind)
            rc, out = run_capture(self.tc.mpifort + self.tc.fflags + ["-J", odir, "-c", "-o",
                                                                      o, src])
            if rc != 0:
                log("  warning: util/mtest_%s does not compile: %s" % (kind, out.strip()[-300:]))
                setattr(self, attr, None)
            else:
                if os.path.exists(lib):
                    os.remove(lib)
                run_capture(["ar", "rcs", lib, o])
                setattr(self, attr, lib)
        return getattr(self, attr)

    def fortran_headers(self, d):
        """Writes the headers configure would generate from *.h.in (address-sized INTEGER
        declarations) into the build directory of d."""
        odir = os.path.join(self.builddir, d)
        sub = d.split("/", 1)[1] if "/" in d else ""
        for sd in {os.path.join(self.srcdir, d), os.path.join(self.srcdir, "f77", sub)}:
            if not os.path.isdir(sd):
                continue
            for f in os.listdir(sd):
                if f.endswith(".h.in"):
                    with open(os.path.join(sd, f)) as fh:
                        text = fh.read()
                    text = re.sub(r"@F77_MPI_(ADDRESS|OFFSET|COUNT)@", "integer*8", text)
                    write_if_changed(os.path.join(odir, f[:-3]), text)

    def build_program(self, d, prog, recipe, extra_cflags):
        odir = os.path.join(self.builddir, d)
        exe = os.path.join(odir, prog)
        logf = exe + ".buildlog"
        if not self.rebuild and os.path.exists(logf):
            with open(logf) as f:
                text = f.read()
            head, _, out = text.partition("\n")
            if head == "stamp %s ok" % self.stamp and os.path.exists(exe):
                return self.portability(out)
            if head == "stamp %s failed" % self.stamp:
                st, reason, missing = classify_build_failure(out)
                return {"ok": False, "status": st, "reason": reason, "missing": missing}
        if not recipe["sources"] or not all(os.path.exists(s) for s in recipe["sources"]):
            return {"ok": False, "status": "build-failed", "reason": "no source for %s" % prog,
                    "missing": []}
        kind = fortran_kind(d)
        if d.startswith("cxx"):
            for src in recipe["sources"]:
                if os.path.exists(src) and "MPI::" in open(src, errors="replace").read():
                    return {"ok": False, "status": "skip", "missing": [],
                            "reason": "out of scope (C++ bindings MPI::, removed in MPI-3.0)"}
        if kind:
            why = fortran_out_of_scope(recipe["sources"], self.tc.fortran_known)
            if why:
                return {"ok": False, "status": "skip", "reason": why, "missing": []}
        threaded = d.startswith("threads") and self.libmtest_thread
        libs = ["-Wl,--start-group", self.libmtest_thread if threaded else self.libmtest]
        if kind and self.fortran_support(kind):
            libs.insert(1, self.fortran_support(kind))
        if "@dtypes" in recipe["extra"] and self.libdtypes:
            libs.append(self.libdtypes)
        if self.libdtpools:
            libs.append(self.libdtpools)
        libs.append("-Wl,--end-group")
        libs += [x for x in recipe["extra"] if x.startswith("-l")] + ["-lm"]
        if os.path.exists(exe):
            os.remove(exe)
        sources = [self.fixed_source(d, src, odir) for src in recipe["sources"]]
        # A fixed copy lives in the build directory: its own directory's headers by -I.
        local = ["-I", os.path.join(self.srcdir, d)] if sources != recipe["sources"] else []
        cmd = (self.tc.mpicc + self.tc.cflags + extra_cflags + recipe["cppflags"]
               + self.incflags() + local + ["-o", exe] + sources + libs + self.tc.ldflags)
        if kind or d.startswith("cxx"):
            # Each program gets its own module directory: tests of one directory are built
            # in parallel and some define modules of the same name.
            moddir = exe + ".mod.d"
            os.makedirs(moddir, exist_ok=True)
            wrapper = self.tc.mpicxx if d.startswith("cxx") else self.tc.mpifort
            flags = self.tc.cxxflags if d.startswith("cxx") else \
                self.tc.fflags + ["-J", moddir, "-I", moddir, "-I", odir,
                                  "-I", os.path.join(self.srcdir, d),
                                  "-I", os.path.join(self.builddir, "lib", "mtest_" + kind)]
            cmd = (wrapper + flags + recipe["cppflags"] + self.incflags() + ["-o", exe]
                   + recipe["sources"] + libs + self.tc.ldflags)
        rc, out = run_capture(cmd, cwd=odir)
        out = out.replace(self.srcdir + "/", "")
        ok = rc == 0 and os.path.exists(exe)
        with open(logf, "w") as f:
            f.write("stamp %s %s\n" % (self.stamp, "ok" if ok else "failed"))
            f.write(" ".join(shlex.quote(c) for c in cmd) + "\n" + out)
        if ok:
            return self.portability(out)
        st, reason, missing = classify_build_failure(out)
        return {"ok": False, "status": st, "reason": reason, "missing": missing}

    @staticmethod
    def fixed_source(d, src, odir):
        """`src`, or a copy in `odir` with the fixes `TEST_DEFECTS` lists for it."""
        fixes = TEST_DEFECTS.get((d, os.path.basename(src)))
        if not fixes:
            return src
        with open(src, errors="replace") as f:
            text = f.read()
        changed = False
        for old, new, _why in fixes:
            if old in text:
                text = text.replace(old, new)
                changed = True
        if not changed:
            return src
        fixed = os.path.join(odir, "fixed-" + os.path.basename(src))
        write_if_changed(fixed, text)
        return fixed

    @staticmethod
    def portability(out):
        """A built program is runnable unless its build shows handles stored in ints."""
        for rx in INT_HANDLE_WARNINGS:
            m = rx.search(out)
            if m:
                w = re.search(r"([\w./-]+\.c:\d+):\d+: warning: (assignment to 'int'|passing "
                              r"argument \d+ of '\w+' from incompatible pointer type)", out)
                where = w.group(1) if w else "see the build log"
                return {"ok": False, "status": "skip", "reason": INT_HANDLE_REASON % where,
                        "missing": []}
        return {"ok": True}

    def build_dir(self, d, progs):
        os.makedirs(os.path.join(self.builddir, d), exist_ok=True)
        am = parse_makefile_am(os.path.join(self.srcdir, d, "Makefile.am"))
        extra = []
        # MPICH declares its MPIX_ calls in mpi.h; libraries that follow Open MPI keep the
        # fault-tolerance interface in mpi-ext.h, which MPICH's ft tests do not include.
        if d == "ft" and self.facts.get("has_mpi_ext_h") and not self.facts.get("is_mpich"):
            extra = ["-include", "mpi-ext.h"]
        if fortran_kind(d):
            self.fortran_headers(d)
        results = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.tc.jobs) as ex:
            futs = {ex.submit(self.build_program, d, p,
                              program_recipe(self.srcdir, d, p, am), extra): p for p in progs}
            for fu in concurrent.futures.as_completed(futs):
                results[futs[fu]] = fu.result()
        return results


# ---------------------------------------------------------------------------------------------
# Running and grading

RE_NO_ERRORS = re.compile(r"^\s*No [Ee]rrors\s*$")
RE_TEST_PASSED = re.compile(r"^\s*Test Passed\s*$")


def grade(rule, output, rc):
    """MPICH runtests' pass rules.  Returns (passed, symptom)."""
    lines = output.splitlines()
    if rule in ("TestStatus", "TestErrFatal"):
        # Both require a non-zero exit status; runtests reads past (and ignores) the output.
        if rc == 0:
            return False, "exit status 0, but the test requires a non-zero status"
        return True, ""
    if rule == "TestExitZero":
        # Ours, for test/mpi/basic (no MPICH testlist): exit 0 and no reported failure.
        bad = [l for l in lines if re.search(r"FAILURE|[Ee]rror", l)]
        if rc != 0:
            return False, "exit status %s%s" % (rc, (": " + bad[0].strip()) if bad else "")
        if bad:
            return False, "reports: " + bad[0].strip()[:160]
        return True, ""
    found = False
    unexpected = []
    for l in lines:
        if "FORTRAN STOP" in l:
            continue
        if RE_NO_ERRORS.match(l):
            if found and rule == "":
                unexpected.append(l)  # runtests accepts only the first " No Errors"
            found = True
            continue
        if RE_TEST_PASSED.match(l):
            continue
        if rule == "" and (re.match(r"^srun: error: .*: signal: Communication connection failure", l)
                           or re.search(r"requesting checkpoint\s*$|checkpoint completed\s*$", l)):
            continue
        unexpected.append(l)
    if rule == "TestStatusNoErrors":
        if not found:
            return False, symptom_of(unexpected, "no \" No Errors\" line (exit status %s)" % rc)
        if unexpected:
            return False, "unexpected output: " + unexpected[0].strip()[:160]
        if rc == 0:
            return False, "exit status 0, but a failed process requires a non-zero status"
        return True, ""
    # Default rule: " No Errors", nothing else, exit status 0.
    if unexpected:
        return False, symptom_of(unexpected, "")
    if not found:
        return False, "no \" No Errors\" line (exit status %s)" % rc
    if rc != 0:
        return False, "exit status %s after \" No Errors\"" % rc
    return True, ""


def symptom_of(unexpected, fallback):
    if not unexpected:
        return fallback
    first = next((l for l in unexpected if l.strip()), unexpected[0]).strip()
    return "output: " + first[:160]


def marked_processes(marker):
    """Live (non-zombie) processes that carry this run's marker in their environment."""
    needle = ("MPICH_TESTS_RUN_ID=%s" % marker).encode()
    me = os.getpid()
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open("/proc/%s/stat" % pid, "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
            if state in (b"Z", b"X"):
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read()
        except (OSError, IndexError):
            continue
        if needle in env.split(b"\0"):
            pids.append(int(pid))
    return pids


def sweep(marker, grace=0.0):
    """Kills every process of this run still alive after `grace` seconds (ranks that a
    launcher left behind), and returns how many there were."""
    end = time.monotonic() + grace
    pids = marked_processes(marker)
    while pids and time.monotonic() < end:
        time.sleep(0.2)
        pids = marked_processes(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(pids)


CURRENT = {}  # the job being run: {"pgid": ..., "marker": ...}, for the signal handler


def on_signal(signum, _frame):
    """Ends the running job (its own session) before the runner exits on SIGINT/SIGTERM."""
    if CURRENT:
        try:
            os.killpg(CURRENT["pgid"], signal.SIGKILL)
        except OSError:
            pass
        sweep(CURRENT["marker"])
    raise SystemExit("interrupted by signal %d" % signum)


# Testlist settings in MPICH's vocabulary whose counterpart in ours has the same meaning and
# unit: both are set (the other MPI ignores the name it does not know).
OUR_NAMES = {
    "MPIR_CVAR_CH3_COMM_CONNECT_TIMEOUT": "STEADFAST_CONNECT_TIMEOUT",
    "MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT": "STEADFAST_CONNECT_TIMEOUT",
}


def run_test(e, exe_dir, mpiexec, np_arg, timeout, pass_mpiexecargs, maxnp):
    np_ = e["np"]
    if maxnp and np_ > maxnp:
        np_ = maxnp
    cmd = list(mpiexec) + [np_arg, str(np_)]
    if pass_mpiexecargs:
        cmd += e["mpiexecargs"]
    cmd += ["./" + e["name"]] + e["args"]
    marker = uuid.uuid4().hex
    env = dict(os.environ)
    for kv in e["envs"]:
        k, _, v = kv.partition("=")
        env[k] = v
        if k in OUR_NAMES:
            env[OUR_NAMES[k]] = v
    env["MPIEXEC_TIMEOUT"] = str(int(-(-timeout // 1)))  # Hydra accepts whole seconds only
    env["MPICH_TESTS_RUN_ID"] = marker
    # Like runtests, the limit goes to the launcher as MPIEXEC_TIMEOUT (init/timeout checks that
    # the launcher enforces it); the runner's own deadline comes a little later, so a launcher
    # that ends the job itself is graded by the test's rule, and one that does not is a TIMEOUT.
    deadline = timeout + max(10.0, 0.25 * timeout)
    start = time.monotonic()
    timed_out = False
    p = subprocess.Popen(cmd, cwd=exe_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    CURRENT.update(pgid=p.pid, marker=marker)
    try:
        out, _ = p.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig, wait in ((signal.SIGTERM, 2), (signal.SIGKILL, 2)):
            try:
                os.killpg(p.pid, sig)
            except OSError:
                pass
            sweep(marker) if sig == signal.SIGKILL else None
            try:
                p.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                pass
        sweep(marker)
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out = b"[output not collected: a left-over process kept the pipe open]"
            p.kill()
    leaked = sweep(marker, grace=3.0)  # processes may still be exiting
    CURRENT.clear()
    secs = time.monotonic() - start
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
    rc = p.returncode
    if timed_out:
        return ("timeout", "no result within the %ss limit (killed at %.0fs)" % (timeout, deadline),
                rc, secs, text, cmd)
    ok, symptom = grade(e.get("resultTest", ""), text, rc if rc is not None else -1)
    if not ok and secs >= timeout - 0.5:
        # The launcher enforced MPIEXEC_TIMEOUT: a hang, whatever the output says.
        return ("timeout", "ended by the launcher at the %ss limit (%s)" % (timeout, symptom),
                rc, secs, text, cmd)
    if leaked:
        # Not part of MPICH's rules (the grade stands), but worth knowing: they were killed.
        symptom = (symptom + "; " if symptom else "") + \
            "%d process(es) left running after the launcher exited" % leaked
    return ("pass" if ok else "fail"), symptom, rc, secs, text, cmd


# ---------------------------------------------------------------------------------------------
# Reports

def summarize(results, dirs):
    summary = {}
    for d in dirs:
        s = {k: 0 for k in STATUSES}
        for r in results:
            if r["dir"] == d:
                s[r["status"]] += 1
        s["total"] = sum(s[k] for k in STATUSES)
        summary[d] = s
    return summary


def table(summary, dirs):
    hdr = "%-9s %6s %6s %6s %8s %8s %13s %9s" % ("dir", "total", "pass", "fail", "timeout",
                                                "skipped", "build-failed", "pass-rate")
    rows = [hdr, "-" * len(hdr)]
    tot = {k: 0 for k in STATUSES + ("total",)}
    for d in dirs:
        s = summary[d]
        for k in tot:
            tot[k] += s[k]
        rows.append(table_row(d, s))
    rows.append("-" * len(hdr))
    # Language directories (f77, f90, f08, cxx) also get a line for all their sub-directories.
    tops = []
    for d in dirs:
        if "/" in d and d.split("/", 1)[0] not in tops:
            tops.append(d.split("/", 1)[0])
    for top in tops:
        t = {k: sum(summary[d][k] for d in dirs if d.startswith(top + "/"))
             for k in STATUSES + ("total",)}
        rows.append(table_row(top + " (all)", t))
    rows.append(table_row("all", tot))
    return "\n".join(rows)


def rate(s):
    ran = s["total"] - s["skip"]
    return "%5.1f %%" % (100.0 * s["pass"] / ran) if ran else "    -"


def table_row(name, s):
    return "%-9s %6d %6d %6d %8d %8d %13d %9s" % (name, s["total"], s["pass"], s["fail"],
                                                 s["timeout"], s["skip"], s["build-failed"],
                                                 rate(s))


def markdown(report, dirs):
    out = []
    out.append("Run of %s, %s; mpicc `%s`, mpiexec `%s`; library MPI version %s.\n" % (
        report["suite"], report["date"], report["mpicc"], report["mpiexec"],
        report["facts"].get("mpi_version")))
    out.append("| dir | total | pass | fail | timeout | skipped | build-failed | pass rate"
               " (of not skipped) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    tot = {k: 0 for k in STATUSES + ("total",)}
    for d in dirs:
        s = report["summary"][d]
        for k in tot:
            tot[k] += s[k]
        out.append("| %s | %d | %d | %d | %d | %d | %d | %s |" % (
            d, s["total"], s["pass"], s["fail"], s["timeout"], s["skip"], s["build-failed"],
            rate(s).strip()))
    out.append("| **all** | %d | %d | %d | %d | %d | %d | %s |" % (
        tot["total"], tot["pass"], tot["fail"], tot["timeout"], tot["skip"],
        tot["build-failed"], rate(tot).strip()))
    out.append("")
    notpass = [r for r in report["tests"] if r["status"] != "pass"]
    if notpass:
        out.append("| test | status | reason |")
        out.append("|---|---|---|")
        for r in notpass:
            note = " (MPICH xfail %s)" % r["xfail"] if r.get("xfail") else ""
            out.append("| `%s` | %s | %s%s |" % (r["id"], r["status"],
                                                 r["reason"].replace("|", "\\|"), note))
    return "\n".join(out) + "\n"


def missing_frequency(results):
    freq = {}
    for r in results:
        if r["status"] == "build-failed":
            for ident in r.get("missing", []):
                if not scope_of(ident):
                    freq[ident] = freq.get(ident, 0) + 1
    return sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))


# ---------------------------------------------------------------------------------------------

def library_exports(mpicc):
    """Counts the MPI_ functions the library exports (nm -D), when mpicc -show names it."""
    rc, out = run_capture(mpicc + ["-show"])
    if rc != 0:
        return None, out.strip()
    words = shlex.split(out)
    ldirs = [w[2:] for w in words if w.startswith("-L")]
    libs = [w[2:] for w in words if w.startswith("-l")]
    for d in ldirs:
        for l in libs:
            path = os.path.join(d, "lib%s.so" % l)
            if os.path.exists(path):
                rc, syms = run_capture(["nm", "-D", "--defined-only", path])
                names = set(re.findall(r"\s[TtWi]\s+(MPI_\w+)", syms))
                return len(names), out.strip()
    return None, out.strip()


def stamp_of(mpicc, show, srcdir, conf_header, cflags):
    """Identifies the build configuration: compiler command and flags, the generated
    configuration header, the library's mpi.h and shared objects."""
    h = hashlib.sha256()
    with open(conf_header, "rb") as f:
        h.update(f.read())
    h.update(repr((mpicc, show, srcdir, cflags)).encode())
    for w in shlex.split(show):
        if w.startswith("-I"):
            p = os.path.join(w[2:], "mpi.h")
            if os.path.exists(p):
                st = os.stat(p)
                h.update(repr((p, st.st_mtime, st.st_size)).encode())
        if w.startswith("-L"):
            d = w[2:]
            if os.path.isdir(d):
                for f in sorted(os.listdir(d)):
                    if re.match(r"lib(mpi|mpich)\w*\.so", f):
                        p = os.path.realpath(os.path.join(d, f))
                        st = os.stat(p)
                        h.update(repr((p, st.st_mtime, st.st_size)).encode())
    return h.hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--srcdir", required=True, help="MPICH's test/mpi directory")
    ap.add_argument("--suite", default="MPICH test/mpi", help="label of the suite version")
    ap.add_argument("--prefix", default=os.path.join(REPO, "install"))
    ap.add_argument("--mpicc", help="compiler wrapper (default PREFIX/bin/mpicc)")
    ap.add_argument("--mpiexec", help="launcher command (default PREFIX/bin/mpiexec)")
    ap.add_argument("--mpifort", help="Fortran wrapper for f77/f90/f08 (default PREFIX/bin/mpifort)")
    ap.add_argument("--mpicxx", help="C++ wrapper for cxx (default PREFIX/bin/mpicxx)")
    ap.add_argument("--np-arg", default="-n")
    ap.add_argument("--dirs", default=DEFAULT_DIRS)
    ap.add_argument("--fast", action="store_true", help="only the tests in scripts/mpich/fast.list")
    ap.add_argument("--tests", help="regular expression on test ids (e.g. 'coll/allred')")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, help="default time limit per test in seconds "
                    "(MPICH's is 180; 60 with --fast); timeLimit= in a testlist overrides it")
    ap.add_argument("--timeout-multiplier", type=float, default=1.0)
    ap.add_argument("--maxnp", type=int, default=0, help="run tests with more processes with "
                    "this many instead (runtests -maxnp); 0: no limit")
    ap.add_argument("--strict", action="store_true", help="skip strict=false tests as MPICH's "
                    "--enable-strictmpi does")
    ap.add_argument("--no-strict-mpi-header", action="store_true",
                    help="do not define USE_STRICT_MPI (it is defined by default: the tests "
                    "then check the standard, not MPICH-specific behaviour)")
    ap.add_argument("--testlist-mpiexecargs", choices=["auto", "yes", "no"], default="auto",
                    help="pass testlists' mpiexecarg= (Hydra options); auto: only to Hydra")
    ap.add_argument("--builddir", help="default build/mpich-tests/<label>")
    ap.add_argument("--out", help="results JSON (default BUILDDIR/results.json); a Markdown "
                    "report is written next to it")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--verbose", "-v", action="store_true", help="print failing tests' output")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    prefix = os.path.abspath(a.prefix)
    mpicc = shlex.split(a.mpicc) if a.mpicc else [os.path.join(prefix, "bin", "mpicc")]
    mpiexec = shlex.split(a.mpiexec) if a.mpiexec else [os.path.join(prefix, "bin", "mpiexec")]
    for tool, what in ((mpicc[0], "--mpicc"), (mpiexec[0], "--mpiexec")):
        if not shutil.which(tool):
            raise SystemExit("error: %s not found (set --prefix or %s)" % (tool, what))
    srcdir = os.path.abspath(a.srcdir)
    dirs = expand_dirs(srcdir, a.dirs.split())
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.realpath(shutil.which(mpicc[0])))
    label = label.strip("_")[-60:]
    builddir = os.path.abspath(a.builddir or os.path.join(REPO, "build", "mpich-tests", label))
    os.makedirs(os.path.join(builddir, "include"), exist_ok=True)
    out_json = os.path.abspath(a.out or os.path.join(builddir, "results.json"))
    default_limit = a.timeout or (60 if a.fast else MPICH_DEFAULT_TIME_LIMIT)
    strict_header = not a.no_strict_mpi_header

    n_exports, show = library_exports(mpicc)
    tc = Toolchain(mpicc, builddir, a.jobs)
    tc.mpifort = shlex.split(a.mpifort) if a.mpifort else [os.path.join(prefix, "bin", "mpifort")]
    tc.mpicxx = shlex.split(a.mpicxx) if a.mpicxx else [os.path.join(prefix, "bin", "mpicxx")]
    # gfortran >= 10 rejects one external called with different argument types in a file,
    # which mpif.h programs do by design; MPICH's configure adds the same flag.
    tc.fflags = ["-O1", "-fallow-argument-mismatch", "-w"]
    tc.cxxflags = ["-O1"]
    tc.fortran_known = set()
    if any(fortran_kind(d) for d in dirs):
        if not shutil.which(tc.mpifort[0]):
            raise SystemExit("error: %s not found (Fortran bindings not built? install "
                             "gfortran and run make, or set --mpifort)" % tc.mpifort[0])
        tc.fortran_known = fortran_names(tc.mpifort)
    log("== configure: probing %s" % " ".join(mpicc))
    defs, facts = probe_config(tc, srcdir, os.path.join(builddir, "include"))
    defs["VERSION"] = '"%s"' % a.suite
    # C parts of the Fortran tests call Fortran routines by name: gfortran's lower case with
    # one trailing underscore.
    defs["F77_NAME_LOWER_USCORE"] = "1"
    conf_header = os.path.join(builddir, "include", "mpitestconf.h")
    write_conf_header(conf_header, defs, strict_header)
    stamp = stamp_of(mpicc, show, srcdir, conf_header, tc.cflags + tc.ldflags)
    log("   MPI %s%s; RMA windows for mtest: %s; MPI-IO: %s; spawn: %s; %s MPI_ functions "
        "exported" % (facts["mpi_version"], " (MPICH)" if facts["is_mpich"] else "",
                      yn(facts["HAVE_MPI_WIN_CREATE"]), yn(facts["HAVE_MPI_IO"]),
                      yn(facts["HAVE_MPI_SPAWN"]), n_exports if n_exports is not None else "?"))

    if a.testlist_mpiexecargs == "auto":
        rc, vout = run_capture(mpiexec + ["--version"], timeout=30)
        pass_mpiexecargs = "HYDRA" in vout.upper()
    else:
        pass_mpiexecargs = a.testlist_mpiexecargs == "yes"

    entries = []
    for d in dirs:
        entries += parse_testlist(srcdir, d)
    if a.fast:
        entries = select_fast(entries, load_fast_list())
    if a.tests:
        rx = re.compile(a.tests)
        entries = [e for e in entries if rx.search(e["id"])]

    mem_total = mem_total_gb()
    major, minor = (facts["mpi_version"] + ".0").split(".")[:2]
    lib_version = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else (0, 0)

    # Decide skips by annotation before building.
    for e in entries:
        e["skip"] = None
        if e.get("skip_reason"):
            e["skip"] = e["skip_reason"]
        elif a.strict and e.get("strict", "").lower() == "false":
            e["skip"] = "non-strict test (MPICH-specific), --strict requested"
        elif e.get("mem") and float(e["mem"]) > mem_total:
            e["skip"] = "needs %s GB of memory, this machine has %.0f" % (e["mem"], mem_total)
        elif e.get("mpiversion"):
            want = tuple(int(x) for x in e["mpiversion"].split(".")[:2])
            if want > lib_version:
                e["skip"] = "needs MPI %s, the library provides %s" % (e["mpiversion"],
                                                                         facts["mpi_version"])

    log("== build: util, dtpools (%s)" % builddir)
    b = Builder(tc, srcdir, builddir, facts, stamp, a.rebuild)
    b.build_support()
    built = {}
    for d in dirs:
        progs = sorted({e["name"] for e in entries if e["dir"] == d and not e["skip"]})
        t0 = time.monotonic()
        built[d] = b.build_dir(d, progs)
        nok = sum(1 for r in built[d].values() if r["ok"])
        log("   %-9s %3d programs built, %3d not (%.0fs)" % (d, nok, len(progs) - nok,
                                                            time.monotonic() - t0))
    if a.build_only:
        return 0

    log("== run: %s -n N ./prog (default time limit %ss)" % (" ".join(mpiexec), default_limit))
    results = []
    for e in entries:
        r = {k: e[k] for k in ("dir", "name", "np", "args", "envs", "id")}
        r["xfail"] = e.get("xfail", "")
        r["strict"] = e.get("strict", "")
        r["resultTest"] = e.get("resultTest", "")
        if e["skip"]:
            r.update(status="skip", reason=e["skip"])
        else:
            br = built[e["dir"]].get(e["name"], {"ok": False, "status": "build-failed",
                                                 "reason": "not built", "missing": []})
            if not br["ok"]:
                r.update(status=br["status"], reason=br["reason"], missing=br["missing"])
            else:
                limit = default_limit
                if re.match(r"^\d+$", e.get("timeLimit", "")):
                    limit = int(e["timeLimit"])
                limit = limit * a.timeout_multiplier
                st, why, rc, secs, text, cmd = run_test(
                    e, os.path.join(builddir, e["dir"]), mpiexec, a.np_arg, limit,
                    pass_mpiexecargs, a.maxnp)
                r.update(status=st, reason=why, exit=rc, seconds=round(secs, 2),
                         command=" ".join(shlex.quote(c) for c in cmd))
                if st != "pass":
                    r["output"] = text[-3000:]
        results.append(r)
        line = "%-12s %s" % (r["status"].upper(), r["id"])
        if "seconds" in r:
            line += "  (%.1fs)" % r["seconds"]
        if r.get("reason"):
            line += "  -- " + r["reason"]
        log(line)
        if a.verbose and r.get("output"):
            log("    | " + "\n    | ".join(r["output"].rstrip().splitlines()[-20:]))

    summary = summarize(results, dirs)
    report = {
        "suite": a.suite,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "mpicc": " ".join(mpicc), "mpiexec": " ".join(mpiexec),
        "mpicc_show": show, "mpi_functions_exported": n_exports,
        "facts": facts, "config": defs, "strict_header": strict_header,
        "default_time_limit": default_limit, "fast": a.fast,
        "summary": summary, "tests": results,
        "missing_functions": missing_frequency(results),
    }
    os.makedirs(os.path.dirname(out_json), exist_ok=True)
    with open(out_json, "w") as f:
        json.dump(report, f, indent=1)
    md = os.path.splitext(out_json)[0] + ".md"
    with open(md, "w") as f:
        f.write(markdown(report, dirs))
    log("")
    log(table(summary, dirs))
    freq = report["missing_functions"]
    if freq:
        log("")
        log("missing in-scope functions (tests that need each): " +
            ", ".join("%s %d" % kv for kv in freq[:25]) + (" ..." if len(freq) > 25 else ""))
    log("")
    log("results: %s\nreport:  %s" % (out_json, md))
    bad = sum(summary[d][k] for d in dirs for k in ("fail", "timeout", "build-failed"))
    return 1 if bad else 0


def yn(b):
    return "yes" if b else "no"


def mem_total_gb():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / (1024.0 * 1024.0)
    except OSError:
        pass
    return 20.0  # runtests' default memory_total


if __name__ == "__main__":
    sys.exit(main())
