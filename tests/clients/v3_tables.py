"""Iceberg tables of format version 3, kept as the REST spec says a catalog keeps tables, for the
environment `v3` of rest_catalog.py's proxy.

Why the proxy keeps them: DuckDB 1.5.5 writes Iceberg tables only through a REST catalog, and the
one REST catalog that runs here, lakana 0.20, cannot hold a table of format version 3. It writes
table metadata with pyiceberg 0.12, which refuses to ("Writing V3 is not yet supported"); and it
refuses DuckDB's staged create (422 "Staged table creation is not implemented."). So the proxy
serves the environment `v3` itself, as it serves views: namespace `bronze` (the one namespace),
tables created staged or at once, loaded, committed with the spec's requirements and updates,
listed and dropped, each metadata version written as a JSON file under the storage root. It
applies the updates as Iceberg's own catalogs do, as far as these tests need; row lineage as the
spec says (a snapshot's `first-row-id` is the table's `next-row-id`, which moves on by the
snapshot's `added-rows`).
"""

import copy
import json
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import unquote

NAMESPACE = ("bronze",)


class Refused(Exception):
    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind = status, kind


def _require(condition, message, status=400, kind="BadRequestException"):
    if not condition:
        raise Refused(status, kind, message)


def _field_ids(fields) -> list:
    """Every field id of a struct's fields, nested ones included."""
    ids = []
    for f in fields:
        ids.append(f["id"])
        kind = f.get("type")
        if isinstance(kind, dict):
            if kind.get("type") == "struct":
                ids += _field_ids(kind["fields"])
            elif kind.get("type") == "list":
                ids.append(kind["element-id"])
                ids += _field_ids([{"id": kind["element-id"], "type": kind["element"]}])[1:]
            elif kind.get("type") == "map":
                ids += [kind["key-id"], kind["value-id"]]
                ids += _field_ids([{"id": kind["value-id"], "type": kind["value"]}])[1:]
    return ids


def _empty(location: str) -> dict:
    """The metadata a table starts from before its first update."""
    return {
        "format-version": 1,
        "table-uuid": str(uuid.uuid4()),
        "location": location,
        "last-sequence-number": 0,
        "last-updated-ms": int(time.time() * 1000),
        "last-column-id": 0,
        "schemas": [],
        "current-schema-id": -1,
        "partition-specs": [],
        "default-spec-id": -1,
        "last-partition-id": 999,
        "properties": {},
        "current-snapshot-id": -1,
        "snapshots": [],
        "snapshot-log": [],
        "metadata-log": [],
        "sort-orders": [],
        "default-sort-order-id": -1,
        "refs": {},
        "next-row-id": 0,
    }


class Updater:
    """Applies a commit's updates to metadata, remembering what it added for the `-1` ids."""

    def __init__(self, metadata: dict):
        self.m = metadata
        self.schema = self.spec = self.order = None

    def apply(self, update: dict) -> None:
        _require(isinstance(update, dict), "an update must be an object")
        action = update.get("action")
        handler = getattr(self, "_" + str(action).replace("-", "_"), None)
        _require(handler is not None, f"unsupported table update {action!r}")
        handler(update)

    def _assign_uuid(self, u):
        self.m["table-uuid"] = u["uuid"]

    def _upgrade_format_version(self, u):
        version = u["format-version"]
        _require(version in (1, 2, 3), f"format version {version} is not one this catalog keeps")
        _require(version >= self.m["format-version"], "a format version is never lowered")
        self.m["format-version"] = version

    def _add_schema(self, u):
        schema = copy.deepcopy(u["schema"])
        _require(schema.get("type") == "struct", "schema must be a struct")
        schema["schema-id"] = max((s["schema-id"] for s in self.m["schemas"]), default=-1) + 1
        self.m["schemas"].append(schema)
        self.m["last-column-id"] = max([self.m["last-column-id"], *_field_ids(schema["fields"])])
        self.schema = schema["schema-id"]

    def _choose(self, given, added, items: str, key: str, field: str):
        """Makes `given` (-1: the one this commit `added`) the metadata's `field`, once `items`
        holds one with that `key`."""
        chosen = added if given == -1 else given
        _require(any(i[key] == chosen for i in self.m[items]), f"no {key} {chosen}")
        self.m[field] = chosen

    def _set_current_schema(self, u):
        self._choose(u["schema-id"], self.schema, "schemas", "schema-id", "current-schema-id")

    def _add_spec(self, u):
        spec = copy.deepcopy(u["spec"])
        for f in spec.get("fields", []):
            if "field-id" not in f:
                self.m["last-partition-id"] += 1
                f["field-id"] = self.m["last-partition-id"]
        self.m["last-partition-id"] = max(
            [self.m["last-partition-id"], *(f["field-id"] for f in spec.get("fields", []))]
        )
        spec["spec-id"] = max((s["spec-id"] for s in self.m["partition-specs"]), default=-1) + 1
        self.m["partition-specs"].append(spec)
        self.spec = spec["spec-id"]

    def _set_default_spec(self, u):
        self._choose(u["spec-id"], self.spec, "partition-specs", "spec-id", "default-spec-id")

    def _add_sort_order(self, u):
        order = copy.deepcopy(u["sort-order"])
        if not order.get("fields"):
            order["order-id"] = 0
        else:
            order["order-id"] = max([0, *(o["order-id"] for o in self.m["sort-orders"])]) + 1
        if all(o["order-id"] != order["order-id"] for o in self.m["sort-orders"]):
            self.m["sort-orders"].append(order)
        self.order = order["order-id"]

    def _set_default_sort_order(self, u):
        self._choose(u["sort-order-id"], self.order, "sort-orders", "order-id", "default-sort-order-id")

    def _set_location(self, u):
        self.m["location"] = u["location"]

    def _set_properties(self, u):
        self.m["properties"].update(u["updates"])

    def _remove_properties(self, u):
        for key in u["removals"]:
            self.m["properties"].pop(key, None)

    def _add_snapshot(self, u):
        snapshot = copy.deepcopy(u["snapshot"])
        _require(
            all(s["snapshot-id"] != snapshot["snapshot-id"] for s in self.m["snapshots"]),
            f"snapshot {snapshot['snapshot-id']} already exists",
        )
        sequence = snapshot.get("sequence-number", 0)
        if self.m["format-version"] >= 2:
            _require(
                sequence > self.m["last-sequence-number"] or not self.m["snapshots"],
                f"sequence number {sequence} is not after {self.m['last-sequence-number']}",
                409, "CommitFailedException",
            )
        if self.m["format-version"] >= 3:
            first, added = snapshot.get("first-row-id"), snapshot.get("added-rows")
            _require(first is not None and added is not None, "a snapshot of format version 3 needs first-row-id and added-rows")
            _require(
                first >= self.m["next-row-id"],
                f"the snapshot's first-row-id {first} is behind the table's next-row-id {self.m['next-row-id']}",
                409, "CommitFailedException",
            )
            self.m["next-row-id"] = first + added
        self.m["snapshots"].append(snapshot)
        self.m["last-sequence-number"] = max(self.m["last-sequence-number"], sequence)

    def _set_snapshot_ref(self, u):
        name, snapshot_id = u["ref-name"], u["snapshot-id"]
        _require(any(s["snapshot-id"] == snapshot_id for s in self.m["snapshots"]), f"no snapshot {snapshot_id}")
        ref = {k: v for k, v in u.items() if k not in ("action", "ref-name")}
        self.m["refs"][name] = ref
        if name == "main":
            self.m["current-snapshot-id"] = snapshot_id
            self.m["snapshot-log"].append({"snapshot-id": snapshot_id, "timestamp-ms": int(time.time() * 1000)})

    def _remove_snapshot_ref(self, u):
        self.m["refs"].pop(u["ref-name"], None)
        if u["ref-name"] == "main":
            self.m["current-snapshot-id"] = -1

    def _remove_snapshots(self, u):
        gone = set(u["snapshot-ids"])
        self.m["snapshots"] = [s for s in self.m["snapshots"] if s["snapshot-id"] not in gone]


def _check(requirement: dict, metadata) -> None:
    """A commit's requirement against the table as it is (None: no such table)."""
    kind = requirement.get("type")
    failed = lambda what: Refused(409, "CommitFailedException", f"Requirement failed: {what}")  # noqa: E731
    if kind == "assert-create":
        if metadata is not None:
            raise failed("table already exists")
        return
    if metadata is None:
        raise Refused(404, "NoSuchTableException", "Table does not exist")
    if kind == "assert-table-uuid":
        if requirement["uuid"] != metadata["table-uuid"]:
            raise failed("table UUID does not match")
    elif kind == "assert-ref-snapshot-id":
        ref = metadata["refs"].get(requirement["ref"])
        if (ref["snapshot-id"] if ref else None) != requirement.get("snapshot-id"):
            raise failed(f"{requirement['ref']} has changed")
    else:
        field = {
            "assert-current-schema-id": ("current-schema-id", "current-schema-id"),
            "assert-last-assigned-field-id": ("last-assigned-field-id", "last-column-id"),
            "assert-last-assigned-partition-id": ("last-assigned-partition-id", "last-partition-id"),
            "assert-default-spec-id": ("default-spec-id", "default-spec-id"),
            "assert-default-sort-order-id": ("default-sort-order-id", "default-sort-order-id"),
        }.get(kind)
        _require(field is not None, f"unknown requirement {kind!r}")
        if requirement[field[0]] != metadata[field[1]]:
            raise failed(f"{field[1]} has changed")


class TableStore:
    """The tables of one environment, by name (namespace `bronze`), under `root` (file://)."""

    def __init__(self, root: str):
        self.root = root
        self.tables = {}  # name -> {"metadata-location", "metadata"}
        self.lock = threading.Lock()

    def _write(self, name: str, metadata: dict) -> dict:
        old = self.tables.get(name)
        if old is not None:
            metadata["metadata-log"].append(
                {"metadata-file": old["metadata-location"], "timestamp-ms": old["metadata"]["last-updated-ms"]}
            )
        number = len(metadata["metadata-log"])
        location = f"{metadata['location']}/metadata/{number:05d}-{uuid.uuid4()}.metadata.json"
        path = Path(location.removeprefix("file://"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(metadata))
        entry = {"metadata-location": location, "metadata": metadata}
        self.tables[name] = entry
        return entry

    def names(self) -> list:
        with self.lock:
            return sorted(self.tables)

    def load(self, name: str) -> dict:
        with self.lock:
            entry = self.tables.get(name)
            if entry is None:
                raise Refused(404, "NoSuchTableException", f"Table does not exist: bronze.{name}")
            return {**copy.deepcopy(entry), "config": {}}

    def create(self, request) -> dict:
        _require(isinstance(request, dict) and isinstance(request.get("name"), str), "CreateTableRequest lacks name")
        name = request["name"]
        properties = dict(request.get("properties") or {})
        version = int(properties.pop("format-version", 2))
        metadata = _empty(request.get("location") or f"{self.root}/bronze/{name}")
        updater = Updater(metadata)
        updates = [
            {"action": "upgrade-format-version", "format-version": version},
            {"action": "add-schema", "schema": request["schema"]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": request.get("partition-spec") or {"fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": request.get("write-order") or {"fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-properties", "updates": properties},
        ]
        for update in updates:
            updater.apply(update)
        with self.lock:
            if name in self.tables:
                raise Refused(409, "AlreadyExistsException", f"Table already exists: bronze.{name}")
            if request.get("stage-create"):
                return {"metadata-location": None, "metadata": metadata, "config": {}}
            return {**copy.deepcopy(self._write(name, metadata)), "config": {}}

    def commit(self, name: str, request) -> dict:
        _require(isinstance(request, dict) and isinstance(request.get("updates"), list), "CommitTableRequest lacks updates")
        with self.lock:
            entry = self.tables.get(name)
            current = entry and entry["metadata"]
            requirements = request.get("requirements") or []
            _require(all(isinstance(r, dict) for r in requirements), "a requirement must be an object")
            # Only a commit that asserts the table's creation may create it (a staged create).
            if current is None and not any(r.get("type") == "assert-create" for r in requirements):
                raise Refused(404, "NoSuchTableException", f"Table does not exist: bronze.{name}")
            for requirement in requirements:
                _check(requirement, current)
            metadata = copy.deepcopy(current) if current else _empty(f"{self.root}/bronze/{name}")
            updater = Updater(metadata)
            for update in request["updates"]:
                updater.apply(update)
            metadata["last-updated-ms"] = int(time.time() * 1000)
            entry = self._write(name, metadata)
            return {"metadata-location": entry["metadata-location"], "metadata": copy.deepcopy(metadata)}

    def drop(self, name: str) -> None:
        with self.lock:
            if self.tables.pop(name, None) is None:
                raise Refused(404, "NoSuchTableException", f"Table does not exist: bronze.{name}")


def route(prefix: str, path: str):
    """`(namespace, kind, table, deeper)` of a path of environment `prefix` (None for the parts it
    does not have; `deeper` if it goes on past the table), else None."""
    parts = [unquote(p) for p in path.split("/")]
    # "", "v1", prefix, "namespaces"[, ns[, "tables"[, name]]]
    if len(parts) < 4 or parts[1] != "v1" or parts[2] != prefix or parts[3] != "namespaces":
        return None
    namespace = tuple(parts[4].split("\x1f")) if len(parts) > 4 else None
    kind = parts[5] if len(parts) > 5 else None
    table = parts[6] if len(parts) > 6 else None
    return namespace, kind, table, len(parts) > 7


def answer(store: TableStore, method: str, path_route, body: bytes, may_write: bool):
    """The answer to one request of the environment: (status, the JSON answer, or None for none)."""
    namespace, kind, table, deeper = path_route
    try:
        if namespace is None:
            _require(method == "GET", f"{method} of namespaces is not served here", 405)
            return 200, {"namespaces": [list(NAMESPACE)]}
        if namespace != NAMESPACE:
            raise Refused(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(namespace)}")
        if kind is None:
            _require(method in ("GET", "HEAD"), f"{method} of a namespace is not served here", 405)
            return (200, {"namespace": list(NAMESPACE), "properties": {}}) if method == "GET" else (204, None)
        _require(kind == "tables" and not deeper, f"{path_route} is not served here", 404, "NotFoundException")
        if method in ("POST", "DELETE") and not may_write:
            raise Refused(403, "ForbiddenException", "may not write tables in bronze")
        if table is None:
            if method == "GET":
                return 200, {"identifiers": [{"namespace": list(NAMESPACE), "name": n} for n in store.names()]}
            _require(method == "POST", f"{method} of tables is not served here", 405)
            return 200, store.create(_json(body))
        if method == "GET":
            return 200, store.load(table)
        if method == "HEAD":
            store.load(table)
            return 204, None
        if method == "DELETE":
            store.drop(table)
            return 204, None
        _require(method == "POST", f"{method} of a table is not served here", 405)
        return 200, store.commit(table, _json(body))
    except Refused as e:
        return e.status, {"error": {"message": str(e), "type": e.kind, "code": e.status}}
    except (KeyError, TypeError, ValueError) as e:
        return 400, {"error": {"message": f"malformed request: {e!r}", "type": "BadRequestException", "code": 400}}


def _json(body: bytes):
    try:
        return json.loads(body)
    except ValueError:
        raise Refused(400, "BadRequestException", "the body is not JSON")
