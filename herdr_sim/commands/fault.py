"""`herdr-sim fault …`: the simulator's own noun, failures injected into the next matching calls."""

from __future__ import annotations


from herdr_sim.commands.base import Flags, Usage, emit


class FaultCommands:
    """The fault noun (the simulator's, not herdr's)."""

    def fault(self, sub: str, args: list[str]) -> int:
        from herdr_sim import faults
        if sub == "add":
            f = Flags(args, values=("--command", "--code", "--message", "--delay-ms", "--times", "--die"),
                      bools=("--drop-root-pane", "--hang"))
            kinds = sum(("--code" in f.values, "--drop-root-pane" in f.bools, "--delay-ms" in f.values, "--die" in f.values,
                         "--hang" in f.bools))
            if f.positional or "--command" not in f.values or kinds != 1 or f.values.get("--die", "before") not in ("before", "after"):
                raise Usage('usage: herdr-sim fault add --command "<group> <sub>" (--code CODE [--message M] | '
                            "--drop-root-pane | --delay-ms N | --die before|after | --hang) [--times N]")
            faults.add(self.paths.home, f.values["--command"], code=f.values.get("--code"),
                       message=f.values.get("--message"), drop_root_pane="--drop-root-pane" in f.bools,
                       delay_ms=int(f.values["--delay-ms"]) if "--delay-ms" in f.values else None,
                       times=int(f.values.get("--times", "1")), die=f.values.get("--die"), hang="--hang" in f.bools)
            return 0
        if sub == "list" and not args:
            for fault in faults.listed(self.paths.home):
                emit(fault.dump())
            return 0
        if sub == "clear" and not args:
            faults.clear(self.paths.home)
            return 0
        raise Usage('usage: herdr-sim fault add|list|clear')
