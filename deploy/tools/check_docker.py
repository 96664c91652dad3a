#!/usr/bin/env python3
"""Keeps deploy/docker in step with what CI runs, since no Docker engine runs
here to build the images:

  - each builder installs scripts/packages-debian.txt through the same filter
    scripts/setup applies to it and msgpack-cxx's headers through
    scripts/install_msgpack_cxx, and from apt nothing else but, in the CUDA
    image, NVIDIA's nvcc, CUDA runtime and cuBLAS development packages;
  - each builder configures and builds with a cmake preset scripts/test builds;
  - the runtime stage is the -slim of its builder's Debian release, installs
    only the CUDA runtime and cuBLAS of the builder's CUDA version (CUDA
    image) or nothing (CPU image), runs as a non-root user, holds only loomd,
    loom and their libraries, and has a HEALTHCHECK through `loom health`;
  - with $LOOMD naming a built loomd (ctest sets it), collect-runtime-libs.sh
    copies every library it links but the C runtime and CUDA's, among them
    libzmq (KV-cache events) and OpenSSL (TLS).

    deploy/tools/check_docker.py      # exit 1 and one line per problem
"""
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

import contract

DOCKERFILES = ["deploy/docker/Dockerfile", "deploy/docker/Dockerfile.cpu"]
PACKAGE_LIST = "scripts/packages-debian.txt"
MSGPACK_INSTALLER = "scripts/install_msgpack_cxx"
# NVIDIA's packages by stage, each name ending in -${CUDA_PKG}.
CUDA_PACKAGES = {"builder": ["cuda-nvcc", "cuda-cudart-dev", "libcublas-dev"],
                 "runtime": ["cuda-cudart", "libcublas"]}
COLLECT_LIBS = "deploy/docker/collect-runtime-libs.sh"
# Libraries the image must carry beside loomd (soname prefixes).
REQUIRED_LIBS = ["libzmq.so.5", "libssl.so.3", "libcrypto.so.3", "libgrpc++.so"]


def setup_filter(setup_text):
    """The sed expression scripts/setup reads the package list with."""
    match = re.search(r"sed ((?:-e '[^']*' ?)+)\s*" + re.escape(PACKAGE_LIST), setup_text)
    if not match:
        raise ValueError(f"scripts/setup does not read {PACKAGE_LIST} through sed")
    return match.group(1).strip()


def packages(sed_filter, list_path):
    """The packages that setup's filter reads from the list (run through sed)."""
    result = subprocess.run(f"sed {sed_filter} {shlex.quote(str(list_path))}", shell=True,
                            capture_output=True, text=True, check=True)
    return result.stdout.split()


def instructions(dockerfile_text):
    """(INSTRUCTION, arguments) pairs, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", dockerfile_text)
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def stages(dockerfile_text):
    """Stage name -> (base image, instructions), with ARG defaults substituted."""
    args = {}
    result = {}
    current = None
    for keyword, rest in instructions(dockerfile_text):
        if keyword == "ARG" and current is None and "=" in rest:
            name, value = rest.split("=", 1)
            args[name] = value
        if keyword == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), rest)
            base, _, name = image.partition(" AS ")
            current = name.strip() or base.strip()
            result[current] = (base.strip(), [])
        elif current is not None:
            result[current][1].append((keyword, rest))
    return result


def _apt_problems(where, stage, runs, cuda):
    """apt-get installs of a stage beyond the package list and NVIDIA's packages."""
    problems = []
    wanted = [f"{name}-${{CUDA_PKG}}" for name in CUDA_PACKAGES[stage]] if cuda else []
    named = []
    for run in runs:
        for install in re.findall(r"apt-get install([^&|;]*)", run):
            named += [word for word in install.split() if not word.startswith("-")]
    if sorted(named) != sorted(wanted):
        problems.append(f"{where}: {stage} installs {named} from apt besides {PACKAGE_LIST}; "
                        f"expected {wanted}")
    return problems


def collected_libs(loomd):
    """(copied, missing): what collect-runtime-libs.sh copies for loomd, and
    the libraries ldd cannot resolve."""
    ldd = subprocess.run(["ldd", loomd], capture_output=True, text=True, check=True).stdout
    missing = [line.split()[0] for line in ldd.splitlines() if "not found" in line]
    with tempfile.TemporaryDirectory() as dest:
        subprocess.run([str(contract.REPO / COLLECT_LIBS), dest, loomd], check=True)
        return sorted(os.listdir(dest)), missing


def check_libs(loomd):
    copied, missing = collected_libs(loomd)
    problems = [f"{COLLECT_LIBS}: loomd needs {lib}, which ldd does not find" for lib in missing]
    for lib in REQUIRED_LIBS:
        if not any(name.startswith(lib) for name in copied):
            problems.append(f"{COLLECT_LIBS}: the image would lack {lib} (copied: "
                            f"{', '.join(copied)})")
    return problems, copied


def check(dockerfile_name, dockerfile_text, setup_text, test_text):
    problems = []
    where = dockerfile_name
    all_stages = stages(dockerfile_text)
    builder = all_stages.get("builder")
    runtime = all_stages.get("runtime")
    if builder is None or runtime is None:
        return [f"{where}: needs stages builder and runtime"]
    expected_filter = setup_filter(setup_text)
    runs = [rest for keyword, rest in builder[1] if keyword == "RUN"]
    copies = [rest for keyword, rest in builder[1] if keyword == "COPY"]
    list_copy = next((c for c in copies if c.startswith(PACKAGE_LIST + " ")), None)
    if list_copy is None:
        problems.append(f"{where}: builder does not copy {PACKAGE_LIST}")
    else:
        copied_to = list_copy.split()[1]
        install = next((r for r in runs if copied_to in r), "")
        used = re.search(r"sed ((?:-e '[^']*' ?)+)\s*" + re.escape(copied_to), install)
        if used is None or used.group(1).strip() != expected_filter:
            problems.append(f"{where}: builder must read {PACKAGE_LIST} with scripts/setup's "
                            f"filter: sed {expected_filter}")
        if "apt-get install" not in install or "--no-install-recommends" not in install:
            problems.append(f"{where}: builder must apt-get install the list "
                            "--no-install-recommends, as scripts/setup does")
    cuda = "CUDA_PKG" in dockerfile_text
    problems += _apt_problems(where, "builder", runs, cuda)
    installer = next((c.split()[1] for c in copies if c.startswith(MSGPACK_INSTALLER + " ")), None)
    install_at = next((i for i, r in enumerate(runs) if installer and installer in r), None)
    if install_at is None:
        problems.append(f"{where}: builder must copy and run {MSGPACK_INSTALLER}")
    elif runs[install_at].find(installer) > runs[install_at].find("rm -rf /var/lib/apt/lists") > 0:
        problems.append(f"{where}: {MSGPACK_INSTALLER} needs apt's lists; run it before they "
                        "are removed")
    used_presets = set(re.findall(r"--preset (\w+)", " ".join(runs)))
    built = set(re.findall(r"^\s*build (\w+)", test_text, re.M))
    if not used_presets or not used_presets <= built:
        problems.append(f"{where}: builder presets {sorted(used_presets)} are not ones "
                        f"scripts/test builds {sorted(built)}")

    builder_image, runtime_image = builder[0], runtime[0]
    if not builder_image.startswith("debian:"):
        problems.append(f"{where}: builder image {builder_image} is not Debian, as CI is")
    if runtime_image != builder_image + "-slim":
        problems.append(f"{where}: runtime image {runtime_image} does not match builder "
                        f"{builder_image} (expected {builder_image}-slim)")
    runtime_steps = runtime[1]
    problems += _apt_problems(where, "runtime", [r for k, r in runtime_steps if k == "RUN"], cuda)
    users = [rest for keyword, rest in runtime_steps if keyword == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append(f"{where}: runtime must end as a non-root USER")
    health = [rest for keyword, rest in runtime_steps if keyword == "HEALTHCHECK"]
    if not health or not re.search(r'"loom",\s*"health"', health[-1]):
        problems.append(f"{where}: runtime needs HEALTHCHECK CMD [\"loom\", \"health\", ...]")
    for keyword, rest in runtime_steps:
        if keyword == "COPY" and "--from=builder" in rest and rest.split()[1] != "/opt/loom":
            problems.append(f"{where}: runtime copies {rest.split()[1]} from the builder; only "
                            "/opt/loom (loomd, loom, their libraries) belongs there")
    installed = re.findall(r"install -D -m 755 \S+ /opt/loom/bin/(\w+)", " ".join(runs))
    if sorted(installed) != ["loom", "loomd"]:
        problems.append(f"{where}: builder must install exactly loomd and loom, not {installed}")
    return problems


def main():
    repo = contract.REPO
    setup_text = (repo / "scripts" / "setup").read_text(encoding="utf-8")
    test_text = (repo / "scripts" / "test").read_text(encoding="utf-8")
    problems = []
    for name in DOCKERFILES:
        problems += check(name, (repo / name).read_text(encoding="utf-8"), setup_text, test_text)
    listed = packages(setup_filter(setup_text), repo / PACKAGE_LIST)
    libs = "no $LOOMD: runtime libraries not checked"
    if os.environ.get("LOOMD"):
        lib_problems, copied = check_libs(os.environ["LOOMD"])
        problems += lib_problems
        libs = f"{len(copied)} runtime libraries of {pathlib.Path(os.environ['LOOMD']).name}"
    for problem in problems:
        print(problem)
    print(f"check_docker: {len(DOCKERFILES)} Dockerfiles, {len(listed)} packages from "
          f"{PACKAGE_LIST}, {libs}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
