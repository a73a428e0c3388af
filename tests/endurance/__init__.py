"""The soak: SIGKILLs during turns with tools and approvals, load, and memory over time.

One harness for both forms: the short one runs in CI (`tests/endurance/test_soak.py`, a
minute or two), the long one is ``make soak`` (`bench/soak.py`: 200 kills, 30 minutes
of steady load). Everything runs on loopback against a real ``agentkeel serve``
process with the scripted agent of the end-to-end suite, and stops by itself.
"""
