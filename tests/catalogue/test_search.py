"""The search index (catalogue/search.py): a caller finds only what its view holds, and the index
follows the catalogue's versions. The catalogue is the real servers' tools of bench/search/servers.json."""

from __future__ import annotations

from functools import cache

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.search.__main__ import catalogue
from gateway.catalogue.merge import Catalogue, merge
from gateway.catalogue.search import SearchIndex
from gateway.catalogue.search_text import query_groups, split_words
from gateway.catalogue.views import TenantView
from gateway.config import TenantConfig

WORDS = ["create", "list", "issue", "file", "page", "delete", "merge", "request", "calendar", "event", "send",
         "message", "search", "branch", "pipeline", "jira", "browser", "click", "time", "database", "repo", "folder"]


@cache
def world() -> tuple[Catalogue, SearchIndex]:
    cat = catalogue()
    index = SearchIndex()
    index.sync(cat)
    return cat, index


NAMESPACES = sorted({backend for backend, _ in world()[0].order})


@st.composite
def tenants(draw: st.DrawFn) -> TenantConfig:
    backends = draw(st.one_of(st.just(("*",)), st.lists(st.sampled_from(NAMESPACES), max_size=6).map(tuple)))
    allow = draw(st.one_of(st.just(("*",)), st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=4)
                           .map(lambda names: tuple(f"{n}__*" for n in names))))
    deny = draw(st.lists(st.sampled_from([f"*{w}*" for w in WORDS]), max_size=3).map(tuple))
    return TenantConfig(name="t", backends=backends, tools_allow=allow, tools_deny=deny, discovery="search")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tenant=tenants(), query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
       limit=st.integers(1, 50))
def test_a_caller_finds_only_tools_its_view_holds(tenant: TenantConfig, query: str, limit: int) -> None:
    cat, index = world()
    view = TenantView(cat, tenant, page_size=100)
    found = index.search(query, view.by_name, limit)
    assert len(found) <= limit
    for hit in found:
        assert view.lookup(hit.entry.exposed) is hit.entry  # callable by this caller, and the very entry
    if found:  # and nothing it holds that matches better is left out for a hidden one: ranks are in order
        assert [hit.score for hit in found] == sorted((hit.score for hit in found), reverse=True)


def test_a_view_that_sees_nothing_finds_nothing() -> None:
    cat, index = world()
    view = TenantView(cat, TenantConfig(name="t", backends=()), page_size=100)
    assert index.search("create an issue", view.by_name, 20) == []


def test_the_index_follows_the_catalogue_and_forgets_removed_tools() -> None:
    cat, _ = world()
    index = SearchIndex()
    index.sync(cat)
    without = merge([pair for pair in cat.order if pair[0] != "gitlab"],
                    {b: s for b, s in cat.snapshots.items() if b != "gitlab"}, "__")
    index.sync(without)
    assert len(index) == len(without.entries)
    assert all(not hit.entry.exposed.startswith("gitlab__")
               for hit in index.search("merge request pipeline", cat.by_name, 50))  # even for a stale view
    index.sync(cat)
    found = [hit.entry.exposed for hit in index.search("approve a merge request", cat.by_name, 3)]
    assert "gitlab__approve_merge_request" in found


def test_names_and_queries_are_split_into_words() -> None:
    assert split_words("listMergeRequests") == ["list", "merge", "requests"]
    assert split_words("get-drive-item HTTPServer jira_get_issue") == ["get", "drive", "item", "http", "server",
                                                                      "jira", "get", "issue"]
    assert query_groups("please delete the repo")[0][0] == "delete" and query_groups("the of")[:1] == []


def test_a_name_the_query_covers_ranks_above_one_that_says_more() -> None:
    cat, index = world()
    found = [hit.entry.exposed for hit in index.search("protect the main branch", cat.by_name, 3)]
    assert found[0] == "gitlab__protect_branch"  # not unprotect_branch nor get_protected_branch
