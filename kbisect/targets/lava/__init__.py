"""A LAVA lab as a target (`kind = "lava"`): each boot is one LAVA job.

config.py reads the target file; job.py writes the job (and, for a lab on this host, the
QEMU device dictionary) and reads the job's log, as pure functions; files.py makes what a
job downloads (the ramdisk carrying the harness, the root fs image) and puts it where
the lab fetches it; lab.py is the one wrapper around the commands that reach LAVA
(`lava-run` on this host, `lavacli` for a server); target.py is the Target. docs/lava.md.
"""
