"""PostgreSQL builds as sides: a server built from a source (a PostgreSQL git tree at a
revision, or Debian's source package) with patches applied, once per inputs, in a build
root of the suite whose guest root it runs on; the guest boots that root with the build
shared at /kbisect/pg (docs/postgres-builds.md)."""
