import ArgumentParser

@main
struct ContentStoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "contentstore")
}
