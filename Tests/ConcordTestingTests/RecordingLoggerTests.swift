import Concord
import ConcordTesting
import Testing

@Suite("RecordingLogger")
struct RecordingLoggerTests {
  @Test func recordsEventsAsTheWriteReturns() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 5)
    #expect(logger.events == [.stored(EntityReference(Author.self, id: 1), modifiedAt: 5)])
    map.store(Author(id: 1, name: "stale"), modifiedAt: 4)
    #expect(logger.staleWrites.count == 1)
    #expect(logger.staleWrites.first?.stored == 5)
    #expect(logger.staleWrites.first?.incoming == 4)
    withExtendedLifetime(author) {}
  }

  @Test func filtersEventsAboutOneEntity() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    map.store(Author(id: 1, name: "A"))
    let other = map.store(Author(id: 2, name: "B"))
    map.store(Author(id: 2, name: "stale"), modifiedAt: .nan)
    map.remove(Author.self, id: 2)
    let about1 = logger.events(about: Author.self, id: 1)
    #expect(
      about1 == [
        .stored(EntityReference(Author.self, id: 1), modifiedAt: nil),
        .released(EntityReference(Author.self, id: 1)),
      ])
    #expect(logger.events(about: Author.self, id: 2).count == 3)
    withExtendedLifetime(other) {}
  }

  @Test func clearForgetsEverything() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    map.store(Author(id: 1, name: "A"))
    logger.clear()
    #expect(logger.events.isEmpty)
  }
}
