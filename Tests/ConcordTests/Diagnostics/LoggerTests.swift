import ConcordTesting
import TestSupport
import Testing

@testable import Concord

/// A logger that reads the map while it logs, to show it runs outside the lock.
final class ReentrantLogger: IdentityMapLogger {
  let map = Locked<IdentityMap?>(nil)
  let counts = Locked<[Int]>([])

  func log(_ event: IdentityMapEvent) {
    if let map = map.value { counts.append(map.count) }
  }
}

@Suite("Logging")
struct LoggerTests {
  let author = EntityReference(Author.self, id: 1)

  @Test func logsEachKindOfEventInOrder() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    var handle: EntityObserver<Author>? = map.store(Author(id: 1, name: "A"), modifiedAt: 5)
    map.store(Author(id: 1, name: "stale"), modifiedAt: 4)
    handle = nil
    let removed = map.store(Author(id: 2, name: "B"))
    map.remove(Author.self, id: 2)
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.removeAlias(named: AliasKey<User>.currentUser)
    #expect(
      logger.events.filter { $0.kind != .discardedStale } == [
        .stored(author, modifiedAt: 5),
        .released(author),
        .stored(EntityReference(Author.self, id: 2), modifiedAt: nil),
        .removed(EntityReference(Author.self, id: 2)),
        .stored(EntityReference(User.self, id: 1), modifiedAt: nil),
        .aliasSet("currentUser"),
        .aliasRemoved("currentUser"),
        .released(EntityReference(User.self, id: 1)),
      ])
    #expect(
      logger.events.contains(.discardedStale(.entity(author), storedStamp: 5, incomingStamp: 4)))
    withExtendedLifetime((handle, removed)) {}
  }

  @Test func staleAliasWriteIsLoggedAgainstTheAlias() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    map.store(User(id: 1, name: "Ged"), named: .currentUser, modifiedAt: 3)
    map.store(User(id: 2, name: "Tenar"), named: .currentUser, modifiedAt: 2)
    #expect(
      logger.events.contains(
        .discardedStale(.alias("currentUser"), storedStamp: 3, incomingStamp: 2)))
  }

  @Test func nestedEntitiesAreLoggedAsStored() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let book = map.store(Book(id: "b", title: "T", author: Author(id: 1, name: "A")))
    #expect(logger.events.contains(.stored(EntityReference(Book.self, id: "b"), modifiedAt: nil)))
    #expect(logger.events.contains(.stored(author, modifiedAt: nil)))
    withExtendedLifetime(book) {}
  }

  /// A write under optimistic layers lowers and raises every shadowed entity, through passes
  /// whose events are dropped: the log shows what the write stored, and only that.
  @Test func aWriteUnderLayersLogsWhatItStoredAndNothingElse() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let book = map.store(Book(id: "b", title: "T", author: Author(id: 1, name: "A")))
    let solo = map.store(Author(id: 2, name: "B"))
    let layer = map.optimistic { transaction in
      transaction.update(Book.self, id: "b") { $0.title = "layered" }
      transaction.update(Author.self, id: 2) { $0.name = "layered" }
    }
    let before = logger.events.count
    map.store(Author(id: 2, name: "server"), modifiedAt: 7)
    map.store(Author(id: 1, name: "server"), modifiedAt: 8)
    #expect(
      Array(logger.events[before...]) == [
        .stored(EntityReference(Author.self, id: 2), modifiedAt: 7),
        .stored(author, modifiedAt: 8),
      ])
    #expect(solo.value.name == "layered" && book.value.title == "layered")
    layer.rollback()
    #expect(solo.value.name == "server" && book.value.author.name == "server")
  }

  @Test func theLoggerRunsAfterTheLockIsReleased() {
    let logger = ReentrantLogger()
    let map = IdentityMap(logger: logger)
    logger.map.withValue { $0 = map }
    let handle = map.store(Author(id: 1, name: "A"))
    #expect(logger.counts.value == [1])
    logger.map.withValue { $0 = nil }
    withExtendedLifetime(handle) {}
  }

  @Test func eventsDescribeThemselves() {
    #expect(
      IdentityMapEvent.stored(author, modifiedAt: 2).description
        == "stored Author(1) modifiedAt 2")
    #expect(
      IdentityMapEvent.stored(author, modifiedAt: 2.5).description
        == "stored Author(1) modifiedAt 2.5")
    #expect(IdentityMapEvent.stored(author, modifiedAt: nil).description == "stored Author(1)")
    #expect(
      IdentityMapEvent.discardedStale(.entity(author), storedStamp: 5, incomingStamp: 4).description
        == "discarded stale write to Author(1): incoming stamp 4 is not newer than 5")
    #expect(
      IdentityMapEvent.discardedStale(.alias("me"), storedStamp: 5, incomingStamp: .nan).description
        == "discarded stale write to alias \"me\": incoming stamp nan is not newer than 5")
    #expect(IdentityMapEvent.removed(author).description == "removed Author(1)")
    #expect(IdentityMapEvent.released(author).description == "released Author(1)")
    #expect(IdentityMapEvent.aliasSet("me").description == "set alias \"me\"")
    #expect(IdentityMapEvent.aliasRemoved("me").description == "removed alias \"me\"")
  }

  @Test func aStaleWritesTargetSaysWhatItWasAimedAt() {
    let toEntity = IdentityMapEvent.discardedStale(
      .entity(author), storedStamp: 5, incomingStamp: 4)
    #expect(toEntity.target == .entity(author))
    #expect(toEntity.target?.entity == author && toEntity.target?.alias == nil)
    #expect(toEntity.entity == author && toEntity.alias == nil)
    let toAlias = IdentityMapEvent.discardedStale(.alias("me"), storedStamp: 5, incomingStamp: 4)
    #expect(toAlias.target == .alias("me") && toAlias.target != .entity(author))
    #expect(toAlias.target?.alias == "me" && toAlias.target?.entity == nil)
    #expect(toAlias.alias == "me" && toAlias.entity == nil)
    #expect(toAlias.target?.description == "alias \"me\"")
  }

  @Test func printLoggerWritesOneLinePerEvent() {
    let lines = Locked<[String]>([])
    let map = IdentityMap(logger: PrintLogger(prefix: ">", output: { lines.append($0) }))
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    #expect(lines.value == ["> stored User(1)", "> set alias \"currentUser\""])
    #expect(PrintLogger().prefix == "[Concord]")
  }
}
