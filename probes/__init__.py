"""Capture backends: each turns prompts into a dump the way one system sees them.

Installed as ``alignprobe.probes``. A probe is anything with ``capture(...)`` that writes a dump;
see each module for the system it speaks for and the source version its convention was read from.
"""
