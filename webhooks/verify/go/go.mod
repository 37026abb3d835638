module ultimatejobs.example/webhookverify

go 1.19
