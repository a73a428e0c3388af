"""The bindings of SPEC 10: each agent in the protocols whose clients users already run.

One package per protocol, each built on the runtime's `RunFacade` only (never on the
native wire's server internals), and mounted by the app factory beside the native wire
and A2A, so that every binding serves the same contexts.
"""
