import Testing

@testable import Concord

@Suite("IdentityMap.statistics: counts for a debug overlay")
struct StatisticsTests {
  @Test("Every count, as things are held and let go")
  func counts() throws {
    let map = IdentityMap(retention: .keepReleased(2))
    #expect(
      map.statistics
        == IdentityMapStatistics(
          entities: 0, entitiesByType: [:], bufferedEntities: 0, handles: 0, subscriptions: 0,
          aliases: 0, queries: 0, collectors: 0, pendingLayers: 0))
    let page = try Recorded.decode([GitHubIssue].self, Recorded.issuesPage)
    let issues = map.store(page)
    let subscription = issues.observe { _ in }
    let stream = issues.values
    map.store(User(id: 1, name: "a"), named: .currentUser)
    let query = map.query(GitHubIssue.self, filter: { $0.state == "open" })
    let collector = map.collector(GitHubLabel.self)
    let layer = map.optimistic { $0.update(User.self, id: 1) { $0.name = "b" } }
    _ = map.store(Author(id: 9, name: "buffered"))

    let statistics = map.statistics
    let users = Set(page.flatMap { [$0.user] + $0.assignees }.map(\.id)).count
    let labels = Set(page.flatMap(\.labels).map(\.id)).count
    let milestones = Set(page.compactMap(\.milestone).map(\.id)).count
    #expect(statistics.entitiesByType["GitHubIssue"] == page.count)
    #expect(statistics.entitiesByType["GitHubUser"] == users)
    #expect(statistics.entitiesByType["GitHubLabel"] == labels)
    #expect(statistics.entitiesByType["GitHubMilestone"] == milestones)
    #expect(statistics.entitiesByType["User"] == 1)
    #expect(statistics.entitiesByType["Author"] == 1)
    #expect(statistics.entities == page.count + users + labels + milestones + 2)
    #expect(statistics.bufferedEntities == 1)
    #expect(statistics.handles == 2)  // the page's and the query's
    #expect(statistics.subscriptions == 2)
    #expect(statistics.aliases == 1)
    #expect(statistics.queries == 1)
    #expect(statistics.collectors == 1)
    #expect(statistics.pendingLayers == 1)
    #expect(
      statistics.description.hasPrefix(
        "\(statistics.entities) entities (1 buffered), 2 handles, 2 subscriptions, 1 alias, "
          + "1 query, 1 collector, 1 pending layer\n"))
    #expect(statistics.description.contains("\n  GitHubIssue: \(page.count)"))

    layer.commit()
    subscription.cancel()
    map.removeAlias(named: AliasKey<User>.currentUser)
    let after = map.statistics
    #expect(after.pendingLayers == 0)
    #expect(after.subscriptions == 1)
    #expect(after.aliases == 0)
    // Nothing holds the user any more: the release buffer keeps it, with the author.
    #expect(after.entitiesByType["User"] == 1)
    #expect(after.bufferedEntities == 2)
    #expect(map.holders(of: User.self, id: 1)?.isRetainedByBuffer == true)
    withExtendedLifetime((issues, stream, query, collector)) {}
  }
}
