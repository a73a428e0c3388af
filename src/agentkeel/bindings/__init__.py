"""The bindings of SPEC 10: protocols whose clients users already run, over the same contexts.

Each binding is a package of its own, built on the runtime's `RunFacade` only, and mounted
by the app factory beside the native wire and A2A.
"""
