# SPDX-License-Identifier: Apache-2.0
"""The wire format: MessagePack values survive a round trip, and every malformed message is a
ProtocolError, never another exception."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyloop.rpc.protocol import check_mac, is_loopback, session_mac
from polyloop.rpc.wire import MAX_DEPTH, ProtocolError, decode, encode

values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=40) | st.binary(max_size=300),
    lambda inner: st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=20),
    max_leaves=40)


@settings(max_examples=60, deadline=None)
@given(values)
def test_values_round_trip(value):
    assert decode(encode(value)) == value


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_protocol_error(data):
    try:
        decode(data)
    except ProtocolError:
        pass


@pytest.mark.parametrize("data, words", [
    (b"\xdd\xff\xff\xff\xff", "longer than the message"),     # an array of 4 G elements
    (b"\xc6\x00\x00\x10\x00abc", "truncated"),                 # 4096 bytes announced, 3 sent
    (b"\xc1", "unknown MessagePack type"),
    (b"\x81\x01\x02", "not a string"),                         # an integer key
    (b"\x82\xa1k\x01\xa1k\x02", "appears twice"),
    (b"\x91" * (MAX_DEPTH + 2) + b"\x00", "nested deeper"),
    (b"\xa2\xff\xfe", "not UTF-8"),
    (b"\x01\x02", "after the end"),
])
def test_malformed_messages_are_refused_with_the_reason(data, words):
    with pytest.raises(ProtocolError, match=words):
        decode(data)


def test_integers_use_every_width_and_big_ones_are_refused():
    for tag, fmt, v in [(0xcc, ">B", 200), (0xcd, ">H", 60000), (0xd1, ">h", -3000),
                        (0xd2, ">i", -2**31), (0xcf, ">Q", 2**64 - 1)]:
        assert decode(bytes((tag,)) + struct.pack(fmt, v)) == v
    with pytest.raises(ProtocolError, match="64 bits"):
        encode(2**64)


def test_the_key_is_proven_without_sending_it():
    nonce = bytes(range(32))
    mac = session_mac(b"k", nonce)
    assert mac is not None and b"k" not in mac
    assert check_mac(b"k", nonce, mac) and not check_mac(b"k", bytes(32), mac)
    assert not check_mac(b"k", nonce, None) and check_mac(None, nonce, None)
    assert is_loopback("::1") and not is_loopback("192.168.1.2")
