"""Who is asking: one resolver for the CLI, the server, the ask job and the evaluation; never a superuser."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag.retrieval.callers import Caller, CallerError, UnknownUser, resolve_caller

USERS = {"alice": Caller(frozenset({"support"})), "bob": Caller(frozenset({"hr", "staff"}))}
GROUP = st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=8)


@given(st.lists(GROUP, min_size=1, max_size=5))
def test_named_groups_are_the_callers_groups_whether_listed_or_comma_separated(groups):
    assert resolve_caller(groups=groups) == resolve_caller(groups=",".join(groups)) == Caller(frozenset(groups))


@pytest.mark.parametrize("groups", ["", " , ", [], ["  "]])
def test_naming_no_group_is_refused(groups):
    with pytest.raises(CallerError, match="no group named"):
        resolve_caller(groups=groups)


def test_a_user_gets_exactly_the_groups_the_users_mapping_gives():
    assert resolve_caller(user="bob", users=USERS).groups == {"hr", "staff"}


def test_a_user_the_mapping_does_not_name_is_unknown_never_a_default():
    with pytest.raises(UnknownUser, match="unknown user 'mallory'"):
        resolve_caller(user="mallory", users=USERS)


def test_a_user_without_any_users_file_or_mapping_is_refused():
    with pytest.raises(CallerError, match="needs a users file"):
        resolve_caller(user="alice")
    with pytest.raises(CallerError, match="name the asking user"):
        resolve_caller()


def test_a_users_file_is_read_and_names_itself_when_the_user_is_missing(tmp_path):
    path = tmp_path / "users.yaml"
    path.write_text("alice: [support]\n")
    assert resolve_caller(user="alice", users_file=path).groups == {"support"}
    with pytest.raises(UnknownUser, match=f"{path}: no user 'carol'"):
        resolve_caller(user="carol", users_file=path)
