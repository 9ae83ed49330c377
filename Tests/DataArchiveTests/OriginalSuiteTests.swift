import ContentStore
@testable import DataArchive
import Foundation
import Synchronization
import Testing

/// The original library's test suite, behaviour for behaviour, each in its own directory.
@Suite struct OriginalSuiteTests {
    let directory = TemporaryDirectory()
    var archive: DataArchive { DataArchive(rootUrl: directory.url) }

    @Test func setPersonWithJSONValueConverter() async {
        let archive = archive
        let result = await result {
            archive.set(key: "person1", value: JSONValueConverter(value: Person(name: "Maxim", age: 38)), completionHandler: $0)
        }
        #expect(result.isSuccess)
        #expect(await archive.deleteAndWait("person1").isSuccess)
        #expect(!archive.keys.contains("person1"))
    }

    @Test func getPersonAfterDeleteFails() async {
        let archive = archive
        #expect(await archive.setAndWait("person2", bytes(#"{"name":"Maxim","age":38}"#)).isSuccess)
        #expect(await archive.deleteAndWait("person2").isSuccess)
        let (person, result) = await archive.getPersonAndWait("person2")
        #expect(!result.isSuccess)
        #expect(isFileNotFound(result))
        #expect(person == nil)
        #expect(archive.keys.isEmpty)
    }

    @Test func setAndGetPerson() async {
        let archive = archive
        let key = "person3"
        // Fire and forget, then get: the get runs after the set.
        archive.set(key: key, value: JSONValueConverter(value: Person(name: "Maxim", age: 38)))
        let (person, result) = await archive.getPersonAndWait(key)
        #expect(result.isSuccess)
        #expect(person?.name == "Maxim")
        #expect(person?.age == 38)
        #expect(await archive.deleteAndWait(key).isSuccess)
    }

    @Test func threeArchiveCurrentCallsGiveNewestFirst() async {
        let archive = archive
        let key = "persons"
        let results = Mutex<[DataArchiveResult]>([])
        let done = Countdown(3)
        for age in 1 ... 3 {
            archive.archiveCurrent(key: key, andSetNew: JSONValueConverter(value: Person(name: "Maxim", age: age))) { result in
                results.withLock { $0.append(result) }
                done.tick()
            }
        }
        await done.wait()
        #expect(results.withLock { $0.allSatisfy(\.isSuccess) })
        let (people, result) = await archive.getAllPeopleAndWait(key)
        #expect(result.isSuccess)
        #expect(people.map(\.age) == [3, 2, 1])
        #expect(archive.numberOfArchives(key: key) == 2)
        #expect(await archive.deleteAndWait(key).isSuccess)
    }

    @Test func lazyReaderYieldsFiveToOneWhileALaterWriteLands() async {
        let archive = archive
        let key = "persons2"
        for age in 1 ... 5 {
            archive.archiveCurrent(key: key, andSetNew: JSONValueConverter(value: Person(name: "Maxim", age: age)))
        }
        let ages = Mutex<[Int]>([])
        let finished = Countdown(1)
        @Sendable func read(with reader: DataArchiveLazyLockingReader) {
            reader.getNext(converterType: JSONValueConverter<Person>.self) { person, result in
                if result.isSuccess, let person {
                    ages.withLock { $0.append(person.age) }
                    read(with: reader)
                } else {
                    #expect(isLockingReaderWasFinished(result))
                    #expect(reader.isFinished)
                    finished.tick()
                }
            }
        }
        archive.lazyLockingReader(key: key) { reader in
            guard let reader else {
                Issue.record("no reader")
                finished.tick()
                return
            }
            read(with: reader)
        }
        // Queued after the reader: the reader locks nothing, so this lands while it reads.
        let write = await archive.archiveAndWait(key, try! JSONEncoder().encode(Person(name: "Max", age: 11)))
        #expect(write.isSuccess)
        let (all, result) = await archive.getAllAndWait(key)
        #expect(result.isSuccess)
        #expect(all.count == 6)
        await finished.wait()
        #expect(ages.withLock { $0 } == [5, 4, 3, 2, 1])
        #expect(await archive.deleteAndWait(key).isSuccess)
    }

    @Test func keepUpToFiveOfTenArchives() async {
        let archive = archive
        let key = "person5"
        for age in 1 ... 10 {
            archive.archiveCurrent(key: key, andSetNew: JSONValueConverter(value: Person(name: "Maxim", age: age)))
        }
        let (current, getResult) = await archive.getPersonAndWait(key)
        #expect(getResult.isSuccess)
        #expect(current?.age == 10)
        archive.keep(upTo: 5, archivesForKey: key, completionHandler: nil)   // fire and forget
        let (people, result) = await archive.getAllPeopleAndWait(key)
        #expect(result.isSuccess)
        #expect(people.map(\.age) == [10, 9, 8, 7, 6, 5])
        #expect(await archive.deleteAndWait(key).isSuccess)
    }

    @Test func dataRoundTrip() async {
        let archive = archive
        let data = Data([1, 2, 3, 4, 5])
        archive.set(key: "data1", data: data)
        let (read, result) = await archive.getAndWait("data1")
        #expect(result.isSuccess)
        #expect(read == data)
        #expect(await archive.deleteAndWait("data1").isSuccess)
    }

    @Test func multipleDataVersionsWithReaderAndKeep() async {
        let archive = archive
        let key = "data2"
        for i in 1 ... 10 {
            archive.archiveCurrent(key: key, andSetNewData: Data([1, 2, 3, UInt8(i)]))
        }
        let first = Countdown(1)
        archive.lazyLockingReader(key: key) { reader in
            reader?.getNext { data, result in
                #expect(result.isSuccess)
                #expect(data == Data([1, 2, 3, 10]))
                reader?.finish()
                #expect(reader?.isFinished == true)
                first.tick()
            }
        }
        archive.keep(upTo: 2, archivesForKey: key, completionHandler: nil)
        let (versions, result) = await archive.getAllAndWait(key)
        #expect(result.isSuccess)
        #expect(versions == [Data([1, 2, 3, 10]), Data([1, 2, 3, 9]), Data([1, 2, 3, 8])])
        await first.wait()
        #expect(await archive.deleteAndWait(key).isSuccess)
    }

    @Test func tenKeysSetReadAndDeletedLeaveNoKeys() async {
        let archive = archive
        for i in 1 ... 10 {
            archive.set(key: "key\(i)", data: Data([1, 2, 3, UInt8(i)]))
        }
        #expect(archive.keys == (1 ... 10).map { "key\($0)" }.sorted())
        let checked = Countdown(10)
        for i in 1 ... 10 {
            archive.get(key: "key\(i)") { data, result in
                #expect(result.isSuccess)
                #expect(data == Data([1, 2, 3, UInt8(i)]))
                checked.tick()
            }
        }
        await checked.wait()
        for i in 1 ... 10 {
            archive.delete(key: "key\(i)", completionHandler: nil)
        }
        #expect(archive.keys.isEmpty)
    }
}
