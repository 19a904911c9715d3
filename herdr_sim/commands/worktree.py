"""`herdr worktree …`: list, create, open, remove."""

from __future__ import annotations


from herdr_sim.commands.base import Flags, Usage, abspath


class WorktreeCommands:
    """The worktree noun."""

    def worktree(self, sub: str, args: list[str]) -> int:
        rid = f"cli:worktree:{sub}"
        cmd = f"worktree {sub}"
        if sub not in ("list", "create", "open", "remove"):
            return self.group_help("worktree", sub)
        from herdr_sim import worktrees
        # Each subcommand has its own flag set (src/cli/worktree.rs:27-283); any other flag is an unknown option.
        values, bools = {
            "list": (("--workspace", "--cwd"), ("--json",)),
            "create": (("--workspace", "--cwd", "--branch", "--base", "--path", "--label"),
                       ("--focus", "--no-focus", "--json")),
            "open": (("--workspace", "--cwd", "--path", "--branch", "--label"), ("--focus", "--no-focus", "--json")),
            "remove": (("--workspace",), ("--force", "--json")),
        }[sub]
        if self.profile.trust_repository:
            bools += ("--trust-repository",)  # 0.9 (#3044): trust the resolved repo path for this one request
        f = Flags(args, values=values, bools=bools)
        if f.positional:
            raise Usage(f"unknown option: {f.positional[0]}")
        if "--workspace" in f.values and "--cwd" in f.values:
            raise Usage("--workspace and --cwd are mutually exclusive")
        cwd = abspath(f.values["--cwd"]) if "--cwd" in f.values else None
        path = abspath(f.values["--path"]) if "--path" in f.values else None
        ws = f.values.get("--workspace")
        if sub == "list":
            return self.request(rid, cmd, lambda e: worktrees.listing(
                e, worktrees.resolve_source(e, ws, cwd, allow_linked=True)))
        if sub == "create":
            return self.request(rid, cmd, lambda e: worktrees.create(
                e, worktrees.resolve_source(e, ws, cwd), f.values.get("--branch"), f.values.get("--base"), path,
                f.values.get("--label"), f.focus(False)))
        if sub == "open":
            if ("--path" in f.values) == ("--branch" in f.values):
                raise Usage("usage: herdr worktree open [--workspace ID | --cwd PATH] (--path PATH | --branch NAME) [--label TEXT] "
                            "[--focus] [--no-focus] [--json]")  # src/cli/worktree.rs:230-235
            return self.request(rid, cmd, lambda e: worktrees.open_(
                e, worktrees.resolve_source(e, ws, cwd), path, f.values.get("--branch"), f.values.get("--label"),
                f.focus(False)))
        if ws is None:
            raise Usage("usage: herdr worktree remove --workspace ID [--force] [--json]")
        return self.request(rid, cmd, lambda e: worktrees.remove(e, ws, "--force" in f.bools))
