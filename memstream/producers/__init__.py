"""producers: the event contract and the append side of the log.

Imports none of memstream's other packages.
"""
