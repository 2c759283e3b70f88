"""enable / disable --persist: plan (pure), act on the host (through Host.run only), and the flow.

plan.py   the planner: what to run and write, as data (RunCommand, WriteFile, Refuse, Note)
act.py    performing a plan: the sh library, --root reads, the safe write, undo, kldload, verify
flow.py   one enable/disable run without any CLI: gather, assess, plan, confirm, perform, re-read
"""
