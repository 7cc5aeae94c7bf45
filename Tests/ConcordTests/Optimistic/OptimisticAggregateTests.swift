import Foundation
import Testing

@testable import Concord

// Each test runs twice: on a map that takes the pass's shortcuts, and on one that takes none
// (`_Pass.isExhaustive`). A layered entity nested in an aggregate has a parent, so the pass
// shows its layer's value and its value underneath in full, both ways.

@Suite("Optimistic layers and aggregates")
struct OptimisticAggregateTests {
  @Test(
    "aggregates show a layered entity, and what is underneath after rollback",
    arguments: [false, true])
  func aggregatesShowTheLayer(exhaustive: Bool) throws {
    let map = IdentityMap()
    map._core.pass.isExhaustive = exhaustive
    let page = map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    let rename = map.optimistic { $0.update(GitHubUser.self, id: 7) { $0.login = "sparrowhawk" } }
    #expect(page.value.map(\.user.login) == ["sparrowhawk", "tenar", "sparrowhawk"])
    #expect(page.value[1].assignees.first?.login == "sparrowhawk")
    rename.rollback()
    #expect(page.value.map(\.user.login) == ["ged", "tenar", "ged"])
    map._core._checkInvariants()
  }

  @Test(
    "a layered aggregate keeps showing its nested entities' own visible values",
    arguments: [false, true])
  func layeredAggregate(exhaustive: Bool) throws {
    let map = IdentityMap()
    map._core.pass.isExhaustive = exhaustive
    let issue = map.store(try Recorded.decode(GitHubIssue.self, Recorded.retitledHook))
    // The layer closes the issue; then the server renames its author underneath.
    let close = map.optimistic { $0.update(GitHubIssue.self, id: 1001) { $0.state = "closed" } }
    map.update(GitHubUser.self, id: 8) { $0.login = "tenar-of-atuan" }
    #expect(issue.value.state == "closed")
    // Tenar is nested in the layered issue, but the layer did not change her: the issue shows
    // her as she is.
    #expect(issue.value.assignees.map(\.login) == ["ged", "tenar-of-atuan"])
    close.rollback()
    #expect(issue.value.state == "open")
    #expect(issue.value.assignees.map(\.login) == ["ged", "tenar-of-atuan"])
    map._core._checkInvariants()
  }

  @Test(
    "a server write to a layered aggregate goes underneath, nested entities included",
    arguments: [false, true])
  func serverWriteToALayeredAggregate(exhaustive: Bool) throws {
    let map = IdentityMap()
    map._core.pass.isExhaustive = exhaustive
    let issue = map.store(try Recorded.decode(GitHubIssue.self, Recorded.retitledHook))
    let label = map.optimistic { transaction in
      transaction.update(GitHubIssue.self, id: 1001) {
        $0.labels.append(GitHubLabel(id: 9, name: "optimistic", color: "ffffff"))
      }
    }
    #expect(issue.value.labels.map(\.id) == [1, 9])
    var fromServer = issue.value
    fromServer.labels = [GitHubLabel(id: 1, name: "bug", color: "d73a4a")]
    fromServer.title = "Retitled by the server"
    fromServer.updatedAt = fromServer.updatedAt.addingTimeInterval(60)
    map.store(fromServer)
    #expect(issue.value.labels.map(\.id) == [1, 9], "the layer's labels stay visible")
    #expect(map.find(GitHubLabel.self, id: 9) != nil, "held by the layered issue")
    label.rollback()
    #expect(issue.value.title == "Retitled by the server")
    #expect(issue.value.labels.map(\.id) == [1])
    #expect(map.find(GitHubLabel.self, id: 9) == nil, "only the layer created it")
    map._core._checkInvariants()
  }

  // Ged is shadowed while nothing nests him, so a write from outside lowers him without a pass
  // (his value and the one underneath are exchanged, then exchanged back). The server's write
  // here makes an issue his parent: raising him must patch the issue with his layer's value.
  @Test(
    "an entity a layer shadows, nested by an aggregate the server stores, shows its layer's value in it",
    arguments: [false, true])
  func nestedUnderTheLayer(exhaustive: Bool) throws {
    let map = IdentityMap()
    map._core.pass.isExhaustive = exhaustive
    let ged = map.store(GitHubUser(id: 7, login: "ged", avatarURL: "https://avatars.example/7"))
    let rename = map.optimistic { $0.update(GitHubUser.self, id: 7) { $0.login = "sparrowhawk" } }
    let issue = map.store(try Recorded.decode(GitHubIssue.self, Recorded.retitledHook))
    #expect(issue.value.user.login == "sparrowhawk")
    #expect(issue.value.assignees.map(\.login) == ["sparrowhawk", "tenar"])
    #expect(ged.value.login == "sparrowhawk")
    map._core._checkInvariants()
    rename.rollback()
    #expect(issue.value.user.login == "ged")
    #expect(ged.value.login == "ged")
    map._core._checkInvariants()
  }
}
