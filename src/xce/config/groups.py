"""The `host_groups:` and `user_groups:` sections (LSF's HostGroup and UserGroup):
named lists whose members may name other groups, expanded at load (cycles refused).

Host groups stand for host-list entries (names, ranges, `all`, `template:GLOB`):
`read_host_patterns` resolves a group name into them wherever a host list is read.
User groups stand for user names; a queue's `users:` names them as `group:NAME`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from xce.config.fields import MapReader, Place, as_list, as_text

USER_GROUP_PREFIX = "group:"

# What one entry of a group stands for: its patterns, with the names of the groups it
# names (resolved by the caller, in order).
Expand = Callable[[str, Place], list[str]]


def read_host_groups(
    value: object, place: Place, static_hosts: Collection[str]
) -> dict[str, tuple[str, ...]]:
    """Validate `host_groups:` into group -> its host-list entries, groups expanded."""
    from xce.config.host_patterns import expand_host_entry  # (it resolves groups too)

    section = MapReader(value, place)
    for name, _members, _member_place in section.items():
        group_place = section.key_place(name)
        text = as_text(name, group_place)
        if text in static_hosts:
            group_place.fail(f"host group {text!r} is named like a host")
        if text == "all" or text.startswith("template:") or any(c.isspace() for c in text):
            group_place.fail(f"invalid host group name {text!r}")

    def expand(entry: str, entry_place: Place) -> list[str]:
        return expand_host_entry(entry, entry_place, static_hosts)

    return _resolve(section, "host group", lambda entry: entry, expand)


def read_user_groups(value: object, place: Place) -> dict[str, tuple[str, ...]]:
    """Validate `user_groups:` into group -> user names (nested groups expanded)."""
    section = MapReader(value, place)
    for name, _members, _member_place in section.items():
        text = as_text(name, section.key_place(name))
        if text == "all" or text.startswith(USER_GROUP_PREFIX) or any(
            c.isspace() for c in text
        ):
            section.key_place(name).fail(f"invalid user group name {text!r}")

    def expand(entry: str, entry_place: Place) -> list[str]:
        if entry == "all" or any(c.isspace() for c in entry):
            entry_place.fail(f"invalid user name {entry!r}")
        return [entry]

    return _resolve(section, "user group", _user_group_name, expand)


def _user_group_name(entry: str) -> str | None:
    return entry[len(USER_GROUP_PREFIX):] if entry.startswith(USER_GROUP_PREFIX) else None


def _resolve(
    section: MapReader,
    what: str,
    group_of: Callable[[str], str | None],
    expand: Expand,
) -> dict[str, tuple[str, ...]]:
    """Each group's members expanded depth first: `group_of(entry)` names the group an
    entry refers to (None: not a group reference; for host groups every entry is tried
    as a group first), `expand` expands any other entry. Unknown groups (for user
    groups) and cycles are errors at the entry."""
    raw: dict[str, list[tuple[str, Place]]] = {}
    for name, members, members_place in section.items():
        items = as_list(members, members_place)
        if not items:
            members_place.fail("must not be empty")
        raw[str(name)] = [(as_text(item, item_place), item_place) for item, item_place in items]
    done: dict[str, tuple[str, ...]] = {}

    def visit(group: str, path: tuple[str, ...]) -> tuple[str, ...]:
        found = done.get(group)
        if found is not None:
            return found
        members: dict[str, None] = {}
        for entry, entry_place in raw[group]:
            ref = group_of(entry)
            if ref is not None and ref in raw:
                if ref in path or ref == group:
                    entry_place.fail(
                        f"{what} cycle: {' -> '.join((*path, group, ref))}"
                    )
                members.update(dict.fromkeys(visit(ref, (*path, group))))
            elif ref is not None and ref != entry:  # `group:NAME` naming no group
                entry_place.fail(f"unknown {what} {ref!r}")
            else:
                members.update(dict.fromkeys(expand(entry, entry_place)))
        done[group] = tuple(members)
        return done[group]

    return {group: visit(group, ()) for group in raw}


def expand_user_entries(
    value: object, place: Place, user_groups: Mapping[str, tuple[str, ...]]
) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """A queue's `users:` list: (the user names it allows, None for `all`; the list as
    written, for display)."""
    items = as_list(value, place)
    if not items:
        place.fail("must not be empty (omit users for every user)")
    written: dict[str, None] = {}
    users: dict[str, None] = {}
    everyone = False
    for item, item_place in items:
        entry = as_text(item, item_place)
        written[entry] = None
        group = _user_group_name(entry)
        if entry == "all":
            everyone = True
        elif group is not None:
            if group not in user_groups:
                item_place.fail(f"unknown user group {group!r}")
            users.update(dict.fromkeys(user_groups[group]))
        elif any(c.isspace() for c in entry):
            item_place.fail(f"invalid user name {entry!r}")
        else:
            users[entry] = None
    return (None if everyone else tuple(users)), tuple(written)
