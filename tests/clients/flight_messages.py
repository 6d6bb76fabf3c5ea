"""Flight SQL's protobuf messages, encoded and decoded by hand: the client tests send commands
no client library exposes (other users' handles, garbage) and read the answers' fields."""

import pyarrow.flight as flight

SQL_TYPE = "type.googleapis.com/arrow.flight.protocol.sql."


def varint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | 0x80 if n else low)
        if not n:
            return bytes(out)


def field(number, value: bytes):
    """A length-delimited field (string, bytes, message)."""
    return varint(number << 3 | 2) + varint(len(value)) + value


def read_varint(data, i):
    n = shift = 0
    while True:
        byte = data[i]
        i += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n, i


def parse(data):
    """A message's fields in order: (number, int or bytes)."""
    fields = []
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            length, i = read_varint(data, i)
            value, i = data[i : i + length], i + length
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        fields.append((number, value))
    return fields


def pack(message_name, message: bytes):
    """A google.protobuf.Any holding a Flight SQL message."""
    return field(1, (SQL_TYPE + message_name).encode()) + field(2, message)


def unpack(data, message_name):
    fields = dict(parse(data))
    assert fields[1].decode() == SQL_TYPE + message_name, fields
    return fields.get(2, b"")


def statement(sql):
    return flight.FlightDescriptor.for_command(pack("CommandStatementQuery", field(1, sql.encode())))
