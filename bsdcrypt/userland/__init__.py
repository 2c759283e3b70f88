"""Userland AES-NI when the hypervisor hides it: OPENSSL_ia32cap computed, proved, measured, persisted.

ia32cap (pure grammar and values), assess (pure: the status side), trial (child processes on the host;
the measurement is bench/speed.py's), plan (pure: the per-service edit as data). docs/userland.md tells the story.
"""
