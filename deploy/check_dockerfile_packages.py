#!/usr/bin/env python3
"""Checks that deploy/Dockerfile's packages agree with the build and with the real binaries.

1. The build stage installs its packages from scripts/apt-packages.txt (copied in and fed to
   `xargs apt-get install`), and lists no package of its own: one source of truth, which
   BUILD.md names too.
2. Every shared library the real binaries load (`ldd`), mapped to its Debian package with
   `dpkg -S`, is installed in the runtime stage: libraries the binaries link directly
   (DT_NEEDED) must come from a package the runtime stage lists by name; the libraries
   those pull in must come from a listed package or from the dependency closure of the
   listed packages (Depends/Pre-Depends, read from dpkg's database).
3. Every package the runtime stage lists is a real package (installed here or known to apt),
   and none is a -dev package.

Usage:
  check_dockerfile_packages.py --dockerfile deploy/Dockerfile \
      --apt-packages scripts/apt-packages.txt --build-md BUILD.md BINARY...

Exit status 0 when everything agrees; 1 with one line per problem otherwise. Only the
standard library and dpkg/ldd/readelf (Debian) are used.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys


def fail_list(problems):
    for problem in problems:
        print(f"check_dockerfile_packages: {problem}", file=sys.stderr)
    return 1 if problems else 0


# ---------------------------------------------------------------------------------------------
# Dockerfile parsing: stages, instructions (continuations joined, comments dropped).
# ---------------------------------------------------------------------------------------------

def parse_stages(text):
    """[(stage_name, [(INSTRUCTION, arguments), ...]), ...] in file order."""
    logical = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") and not current:
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        if current.strip():
            logical.append(current.strip())
        current = ""
    if current.strip():
        logical.append(current.strip())

    stages = []
    for line in logical:
        parts = line.split(None, 1)
        instruction = parts[0].upper()
        arguments = parts[1] if len(parts) > 1 else ""
        if instruction == "FROM":
            words = arguments.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else words[0]
            stages.append((name, []))
        elif stages:
            stages[-1][1].append((instruction, arguments))
    return stages


def apt_install_packages(command):
    """Package names given literally to `apt-get install` in a shell command (options and
    the words of other commands dropped)."""
    packages = []
    for segment in re.split(r"&&|\|\||;|\|", command):
        try:
            words = shlex.split(segment)
        except ValueError:
            words = segment.split()
        for i, word in enumerate(words):
            if word in ("apt-get", "apt") and i + 1 < len(words) and words[i + 1] == "install":
                for arg in words[i + 2:]:
                    if not arg.startswith("-"):
                        packages.append(arg)
                break
    return packages


def read_package_list(path):
    packages = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                packages.append(line)
    return packages


# ---------------------------------------------------------------------------------------------
# dpkg / ldd.
# ---------------------------------------------------------------------------------------------

def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def ldd_libraries(binary):
    """{soname: resolved path} of every library the dynamic loader maps for `binary`."""
    result = run(["ldd", binary])
    if result.returncode != 0:
        raise RuntimeError(f"ldd {binary} failed: {result.stderr.strip()}")
    libraries = {}
    for line in result.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            soname, rest = [part.strip() for part in line.split("=>", 1)]
            if rest.startswith("not found"):
                raise RuntimeError(f"ldd {binary}: {soname} not found on this machine")
            path = rest.split(" (", 1)[0].strip()
            if path:
                libraries[soname] = path
        elif line.startswith("/"):
            # The dynamic loader itself: "/lib64/ld-linux-x86-64.so.2 (0x...)".
            path = line.split(" (", 1)[0]
            libraries[os.path.basename(path)] = path
    return libraries


def needed_sonames(binary):
    result = run(["readelf", "-d", binary])
    if result.returncode != 0:
        raise RuntimeError(f"readelf -d {binary} failed: {result.stderr.strip()}")
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", result.stdout)


def path_spellings(path):
    """The spellings dpkg may know a library by: with merged /usr, the / or the /usr form,
    of the path or of its symlink target."""
    spellings = []
    for candidate in (path, os.path.realpath(path)):
        for spelling in (candidate, candidate[len("/usr"):] if candidate.startswith("/usr/")
                         else "/usr" + candidate):
            if spelling not in spellings:
                spellings.append(spelling)
    return spellings


def packages_of(paths):
    """{path: Debian package owning it, or None}, with one `dpkg -S` for all of them."""
    spellings = {path: path_spellings(path) for path in paths}
    every = sorted({s for group in spellings.values() for s in group})
    owner = {}
    if every:
        # Exit status 1 when some spelling is unknown (expected); the found ones are printed.
        result = run(["dpkg", "-S", *every])
        for line in result.stdout.splitlines():
            match = re.match(r"^(.+?): (/.*)$", line)
            if match:
                package = match.group(1).split(",")[0].strip().split(":", 1)[0]
                owner.setdefault(match.group(2).strip(), package)
    return {path: next((owner[s] for s in group if s in owner), None)
            for path, group in spellings.items()}


def installed_packages():
    """{installed package: [names it depends on]} (Depends + Pre-Depends; every alternative
    of an `a | b` group, since any of them may be the one apt picks), one dpkg-query."""
    result = run(["dpkg-query", "-W",
                  "-f=${Package}\t${db:Status-Abbrev}\t${Depends}, ${Pre-Depends}\n"])
    packages = {}
    for line in result.stdout.splitlines():
        fields = line.split("\t")
        if len(fields) != 3 or not fields[1].startswith("ii"):
            continue
        names = []
        for group in fields[2].split(","):
            for alternative in group.split("|"):
                name = alternative.strip().split(" ", 1)[0].split(":", 1)[0]
                if name:
                    names.append(name)
        packages[fields[0]] = names
    return packages


def known_to_apt(package):
    result = run(["apt-cache", "show", "--no-all-versions", package])
    return result.returncode == 0 and "Package:" in result.stdout


def closure(packages, installed):
    seen = set()
    todo = list(packages)
    while todo:
        package = todo.pop()
        if package in seen:
            continue
        seen.add(package)
        todo.extend(installed.get(package, []))
    return seen


# ---------------------------------------------------------------------------------------------
# The checks.
# ---------------------------------------------------------------------------------------------

def check_build_stage(stage_name, instructions, apt_packages_rel, apt_packages):
    problems = []
    copies = [args for ins, args in instructions if ins in ("COPY", "ADD")]
    copied_as = None
    for args in copies:
        words = [w for w in args.split() if not w.startswith("--")]
        if len(words) >= 2 and apt_packages_rel in words[:-1]:
            copied_as = words[-1]
    if copied_as is None:
        problems.append(f"build stage `{stage_name}` does not COPY {apt_packages_rel}")
        return problems
    if copied_as.endswith("/"):
        copied_as += os.path.basename(apt_packages_rel)
    runs = [args for ins, args in instructions if ins == "RUN"]
    uses_list = [r for r in runs if os.path.basename(copied_as) in r and "xargs" in r
                 and re.search(r"apt-get\s+install", r)]
    if not uses_list:
        problems.append(f"build stage `{stage_name}` never feeds {copied_as} to "
                        "`xargs apt-get install`")
    for r in runs:
        inline = [p for p in apt_install_packages(r) if not p.startswith("$")]
        for package in inline:
            where = ("" if package in apt_packages
                     else f" (not in {apt_packages_rel} either)")
            problems.append(f"build stage `{stage_name}` installs `{package}` inline{where}: "
                            f"add it to {apt_packages_rel} instead")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dockerfile", required=True)
    parser.add_argument("--apt-packages", required=True)
    parser.add_argument("--build-md", required=True)
    parser.add_argument("--repo-root", default=None,
                        help="paths in the Dockerfile are relative to it (default: the "
                             "parent of the apt-packages file's folder)")
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()

    repo_root = args.repo_root or os.path.dirname(os.path.dirname(os.path.abspath(
        args.apt_packages)))
    apt_packages_rel = os.path.relpath(os.path.abspath(args.apt_packages), repo_root)
    problems = []

    with open(args.dockerfile, encoding="utf-8") as f:
        stages = parse_stages(f.read())
    if len(stages) < 2:
        return fail_list([f"{args.dockerfile}: expected a build stage and a runtime stage, "
                          f"found {len(stages)} stage(s)"])
    build_name, build_instructions = stages[0]
    runtime_name, runtime_instructions = stages[-1]
    apt_packages = read_package_list(args.apt_packages)

    # 1. Build stage <-> scripts/apt-packages.txt <-> BUILD.md.
    problems += check_build_stage(build_name, build_instructions, apt_packages_rel,
                                  apt_packages)
    with open(args.build_md, encoding="utf-8") as f:
        if apt_packages_rel not in f.read():
            problems.append(f"{args.build_md} does not name {apt_packages_rel}")

    # 2./3. Runtime stage: its literal package list.
    installed = installed_packages()
    runtime_packages = []
    for ins, run_args in runtime_instructions:
        if ins == "RUN":
            runtime_packages += apt_install_packages(run_args)
    if not runtime_packages:
        problems.append(f"runtime stage `{runtime_name}` installs no package")
    for package in runtime_packages:
        if package.endswith("-dev"):
            problems.append(f"runtime stage lists the development package `{package}`")
        elif package not in installed and not known_to_apt(package):
            problems.append(f"runtime stage lists `{package}`, which is neither installed "
                            "here nor known to apt (misspelt, or not a bookworm package?)")
    listed = set(runtime_packages)
    reachable = closure(listed, installed)

    for binary in args.binaries:
        if not os.path.isfile(binary):
            problems.append(f"binary {binary} does not exist (build it first)")
            continue
        try:
            libraries = ldd_libraries(binary)
            needed = set(needed_sonames(binary))
        except RuntimeError as error:
            problems.append(str(error))
            continue
        name = os.path.basename(binary)
        owners = packages_of(list(libraries.values()))
        for soname, path in sorted(libraries.items()):
            package = owners[path]
            if package is None:
                problems.append(f"{name}: {soname} ({path}) belongs to no Debian package: "
                                "the runtime image cannot provide it")
                continue
            if soname in needed and package not in listed:
                problems.append(f"{name} links {soname} directly; its package `{package}` "
                                f"is missing from the runtime stage's apt-get install list")
            elif package not in reachable:
                problems.append(f"{name} loads {soname} (package `{package}`), which no "
                                "package of the runtime stage pulls in")
        print(f"check_dockerfile_packages: {name}: {len(libraries)} libraries "
              f"({len(needed)} direct) provided by the runtime stage")

    if not problems:
        print(f"check_dockerfile_packages: ok (build stage installs {apt_packages_rel}; "
              f"runtime stage: {len(listed)} packages)")
    return fail_list(problems)


if __name__ == "__main__":
    sys.exit(main())
